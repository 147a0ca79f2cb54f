package manifest

import (
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	objs, err := Decode([]byte("# only a comment\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n---\n{\"apiVersion\": \"v1\", \"kind\": \"ServiceAccount\", \"metadata\": {\"name\": \"b\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetKind() != "Namespace" || objs[1].GetName() != "b" {
		t.Errorf("objects %v", objs)
	}
	if _, err := Decode([]byte("kind: A\n---\nkind: [unclosed\n")); err == nil || !strings.Contains(err.Error(), "document 2") {
		t.Errorf("a broken document: %v", err)
	}
}
