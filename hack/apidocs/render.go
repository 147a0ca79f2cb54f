package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// kind is one CRD with its versions sorted out: the one stored, and the others.
type kind struct {
	crd    *apiextensionsv1.CustomResourceDefinition
	stored *apiextensionsv1.CustomResourceDefinitionVersion
	others []*apiextensionsv1.CustomResourceDefinitionVersion
}

// Render returns the API reference of crds, one section per kind in the order of the kinds' names. The
// same CRDs give the same bytes.
func Render(crds []apiextensionsv1.CustomResourceDefinition) ([]byte, error) {
	kinds := make([]kind, 0, len(crds))
	for i := range crds {
		k, err := newKind(&crds[i])
		if err != nil {
			return nil, err
		}
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].crd.Spec.Names.Kind < kinds[j].crd.Spec.Names.Kind })
	var b bytes.Buffer
	writeIntro(&b, kinds)
	for _, k := range kinds {
		writeKind(&b, k)
	}
	return b.Bytes(), nil
}

func newKind(crd *apiextensionsv1.CustomResourceDefinition) (kind, error) {
	k := kind{crd: crd}
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if !v.Storage && !v.Served {
			continue // listed after the served ones
		}
		if !v.Storage {
			k.others = append(k.others, v)
			continue
		}
		if k.stored != nil {
			return kind{}, fmt.Errorf("CRD %s stores two versions, %s and %s", crd.Name, k.stored.Name, v.Name)
		}
		k.stored = v
	}
	if k.stored == nil {
		return kind{}, fmt.Errorf("CRD %s has no stored version", crd.Name)
	}
	for i := range crd.Spec.Versions {
		if v := &crd.Spec.Versions[i]; !v.Storage && !v.Served {
			k.others = append(k.others, v)
		}
	}
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return kind{}, fmt.Errorf("CRD %s version %s has no schema", crd.Name, v.Name)
		}
	}
	return k, nil
}

const intro = `# API reference

<!-- Written by hack/apidocs from deploy/crd (make manifests): change the Go types under apis/, not this page. -->

Every kind of Gantry's API as its CustomResourceDefinition declares it: the version the API server
stores, the other versions it serves, and each field.

How to read the tables:

- A path starts at the top of the object. ` + "`[]`" + ` stands for each item of a list, ` + "`*`" + ` for each
  value of a map. ` + "`apiVersion`, `kind` and `metadata`" + `, which every object has, are left out.
- ` + "`quantity`" + ` is a Kubernetes resource quantity, a number or a string: ` + "`8`, `500m`, `16Gi`" + `.
- ` + "`[]Condition`" + ` is a list of standard Kubernetes conditions: ` + "`type`, `status` (`True`, `False` or\n  `Unknown`), `reason`, `message`, `lastTransitionTime`, `observedGeneration`" + `. The types and reasons
  are explained in [troubleshooting.md](troubleshooting.md).
- Required: the API server refuses an object that has the field's parent but not the field.
- Default: what the API server writes when the field is left out.
- Rules: expressions in CEL that the API server checks on every write; it refuses a write that breaks
  one, with the rule's message.

`

func writeIntro(b *bytes.Buffer, kinds []kind) {
	b.WriteString(intro)
	b.WriteString("| kind | group | scope | stored version | also served |\n|---|---|---|---|---|\n")
	for _, k := range kinds {
		n := k.crd.Spec.Names
		fmt.Fprintf(b, "| [%s](#%s) | `%s` | %s | `%s` | %s |\n", n.Kind, strings.ToLower(n.Kind), k.crd.Spec.Group,
			scope(k.crd), k.stored.Name, cell(servedList(k)))
	}
	b.WriteString("\n")
}

func scope(crd *apiextensionsv1.CustomResourceDefinition) string {
	if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
		return "Namespaced"
	}
	return "Cluster"
}

// servedList names the versions served besides the stored one, the deprecated ones marked.
func servedList(k kind) string {
	var vs []string
	for _, v := range k.others {
		if !v.Served {
			continue
		}
		s := "`" + v.Name + "`"
		if v.Deprecated {
			s += " (deprecated)"
		}
		vs = append(vs, s)
	}
	if len(vs) == 0 {
		return "none"
	}
	return strings.Join(vs, ", ")
}

func writeKind(b *bytes.Buffer, k kind) {
	n := k.crd.Spec.Names
	fmt.Fprintf(b, "## %s\n\n", n.Kind)
	if d := oneLine(k.stored.Schema.OpenAPIV3Schema.Description); d != "" {
		b.WriteString(escape(d) + "\n\n")
	}
	resource := fmt.Sprintf("`%s.%s`, singular `%s`", n.Plural, k.crd.Spec.Group, n.Singular)
	if len(n.ShortNames) > 0 {
		resource += ", short names " + codeList(n.ShortNames)
	}
	fmt.Fprintf(b, "- Group: `%s`\n- Scope: %s\n- Resource: %s\n", k.crd.Spec.Group, scope(k.crd), resource)
	stored := ""
	if !k.stored.Served {
		stored = " (not served)"
	}
	fmt.Fprintf(b, "- Stored version: `%s`%s\n", k.stored.Name, stored)
	for _, v := range k.others {
		b.WriteString("- " + versionLine(k, v) + "\n")
	}
	b.WriteString("\n")
	writeColumns(b, k.stored)
	writeSchema(b, n.Kind, "", k.stored.Schema.OpenAPIV3Schema)
	for _, v := range k.others {
		if v.Served && !sameSchema(k.stored, v) {
			writeSchema(b, n.Kind, v.Name, v.Schema.OpenAPIV3Schema)
		}
	}
}

// versionLine says how a version other than the stored one is served.
func versionLine(k kind, v *apiextensionsv1.CustomResourceDefinitionVersion) string {
	if !v.Served {
		return fmt.Sprintf("Not served: `%s`", v.Name)
	}
	s := fmt.Sprintf("Also served: `%s`", v.Name)
	if v.Deprecated {
		s += ", deprecated"
		if v.DeprecationWarning != nil && *v.DeprecationWarning != "" {
			s += " (the API server warns: " + escape(*v.DeprecationWarning) + ")"
		}
	}
	if sameSchema(k.stored, v) {
		return s + fmt.Sprintf("; the same schema as `%s`", k.stored.Name)
	}
	return s + fmt.Sprintf("; its own schema, below the fields of `%s`", k.stored.Name)
}

func sameSchema(a, b *apiextensionsv1.CustomResourceDefinitionVersion) bool {
	return reflect.DeepEqual(a.Schema, b.Schema)
}

// writeColumns lists what kubectl get shows of the kind.
func writeColumns(b *bytes.Buffer, v *apiextensionsv1.CustomResourceDefinitionVersion) {
	if len(v.AdditionalPrinterColumns) == 0 {
		return
	}
	b.WriteString("**kubectl get** shows:\n\n| column | value | shown |\n|---|---|---|\n")
	for _, c := range v.AdditionalPrinterColumns {
		shown := "always"
		if c.Priority > 0 {
			shown = "with `-o wide`"
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", cell(escape(c.Name)), cell(code(c.JSONPath)), shown)
	}
	b.WriteString("\n")
}

// writeSchema writes the fields of a schema and its rules; version is empty for the stored version.
func writeSchema(b *bytes.Buffer, kindName, version string, root *apiextensionsv1.JSONSchemaProps) {
	title := "**Fields**"
	if version != "" {
		title = fmt.Sprintf("**Fields in `%s`**", version)
	}
	fields := fieldsOf(root)
	b.WriteString(title + ":\n\n| field | type | required | default | limits | description |\n|---|---|---|---|---|---|\n")
	for _, f := range fields {
		req := ""
		if f.required {
			req = "yes"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", code(f.path), cell(escape(typeOf(f.schema))), req,
			defaultOf(f.schema), cell(strings.Join(limitsOf(f.schema), "; ")), cell(escape(oneLine(f.schema.Description))))
	}
	b.WriteString("\n")
	rules := rulesOf(kindName, root)
	if len(rules) == 0 {
		return
	}
	title = "**Rules**"
	if version != "" {
		title = fmt.Sprintf("**Rules in `%s`**", version)
	}
	b.WriteString(title + ":\n\n| on | rule | message |\n|---|---|---|\n")
	for _, r := range rules {
		fmt.Fprintf(b, "| %s | %s | %s |\n", cell(code(r.path)), cell(code(r.rule)), cell(r.message))
	}
	b.WriteString("\n")
}

// defaultOf is the field's default as the API server writes it: a string as it is, anything else as JSON.
func defaultOf(s *apiextensionsv1.JSONSchemaProps) string {
	if s.Default == nil {
		return ""
	}
	return code(jsonValue(s.Default.Raw))
}

func jsonValue(raw []byte) string {
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	var c bytes.Buffer
	if json.Compact(&c, raw) != nil {
		return string(raw)
	}
	return c.String()
}
