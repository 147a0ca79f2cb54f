package testbed

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestAuditKeepsWritesAndRefusedKeepsRefusals(t *testing.T) {
	tb := &Testbed{Dir: t.TempDir()}
	logs := filepath.Join(tb.Dir, "kwok", "clusters", "gantry-hub", "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	line := func(verb, user string, code int, at string) string {
		return `{"verb":"` + verb + `","requestURI":"/x","userAgent":"gantry-hub replica/a","stage":"ResponseComplete",` +
			`"user":{"username":"` + user + `"},"responseStatus":{"code":` + strconv.Itoa(code) + `},"requestReceivedTimestamp":"` + at + `"}` + "\n"
	}
	sa := "system:serviceaccount:gantry-system:gantry-hub"
	content := line("get", sa, 200, "2026-12-01T10:00:00Z") + line("patch", sa, 200, "2026-12-01T10:00:01Z") +
		line("create", sa, 403, "2026-12-01T09:00:00Z") + line("list", sa, 403, "2026-12-01T10:00:02Z") +
		line("create", "system:admin", 403, "2026-12-01T10:00:03Z")
	if err := os.WriteFile(filepath.Join(logs, "audit.log"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	writes, err := tb.Audit("hub", "replica/a")
	if err != nil {
		t.Fatal(err)
	}
	if len(writes) != 3 {
		t.Errorf("Audit kept %d events, want the 3 writes: %+v", len(writes), writes)
	}
	refused, err := tb.Refused("hub", "system:serviceaccount:gantry-system:", time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) != 1 || refused[0].Verb != "list" {
		t.Errorf("Refused kept %+v, want the one list refused after 9:30", refused)
	}
}
