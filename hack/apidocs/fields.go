package main

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// quantityPattern is the pattern the CRDs give every resource quantity; such a field is a "quantity".
const quantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`

// field is one property of a schema, at its path from the top of the object.
type field struct {
	path     string
	schema   *apiextensionsv1.JSONSchemaProps
	required bool
}

// standard are the properties every object has; the reference leaves them out.
var standard = map[string]bool{"apiVersion": true, "kind": true, "metadata": true}

// fieldsOf lists the fields of an object's schema, depth first, properties in the order of their names.
func fieldsOf(root *apiextensionsv1.JSONSchemaProps) []field {
	var out []field
	for _, name := range sortedNames(root.Properties) {
		if standard[name] {
			continue
		}
		p := root.Properties[name]
		out = append(out, field{path: name, schema: &p, required: contains(root.Required, name)})
		out = appendChildren(out, name, &p)
	}
	return out
}

// appendChildren appends the fields below s, which is at path: its properties, its items' and its
// map values'. A list of conditions is one field.
func appendChildren(out []field, path string, s *apiextensionsv1.JSONSchemaProps) []field {
	if isConditions(s) {
		return out
	}
	for _, name := range sortedNames(s.Properties) {
		p := s.Properties[name]
		f := field{path: path + "." + name, schema: &p, required: contains(s.Required, name)}
		out = append(out, f)
		out = appendChildren(out, f.path, &p)
	}
	if s.Items != nil && s.Items.Schema != nil {
		out = appendChildren(out, path+"[]", s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		out = appendChildren(out, path+".*", s.AdditionalProperties.Schema)
	}
	return out
}

func sortedNames(m map[string]apiextensionsv1.JSONSchemaProps) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// isConditions says whether s is a list of metav1.Condition.
func isConditions(s *apiextensionsv1.JSONSchemaProps) bool {
	if s.Type != "array" || s.Items == nil || s.Items.Schema == nil {
		return false
	}
	props := s.Items.Schema.Properties
	if len(props) != 6 {
		return false
	}
	for _, p := range []string{"lastTransitionTime", "message", "observedGeneration", "reason", "status", "type"} {
		if _, ok := props[p]; !ok {
			return false
		}
	}
	return true
}

// typeOf names a field's type: string, integer (int32), quantity, []string, map[string]quantity, ...
func typeOf(s *apiextensionsv1.JSONSchemaProps) string {
	switch {
	case isConditions(s):
		return "[]Condition"
	case s.XIntOrString && s.Pattern == quantityPattern:
		return "quantity"
	case s.XIntOrString:
		return "integer or string"
	case s.Type == "array":
		if s.Items == nil || s.Items.Schema == nil {
			return "[]any"
		}
		return "[]" + typeOf(s.Items.Schema)
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		return "map[string]" + typeOf(s.AdditionalProperties.Schema)
	case s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields && s.Type == "object" && len(s.Properties) == 0:
		return "object of any fields"
	case s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields:
		return "any"
	case s.Type == "":
		return "any"
	case s.Format != "":
		return s.Type + " (" + s.Format + ")"
	}
	return s.Type
}

// limitsOf says what the schema allows beyond its type, CEL rules aside, each as Markdown.
func limitsOf(s *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			vals[i] = code(jsonValue(e.Raw))
		}
		out = append(out, "one of "+strings.Join(vals, ", "))
	}
	out = appendBound(out, "minimum", s.Minimum, s.ExclusiveMinimum)
	out = appendBound(out, "maximum", s.Maximum, s.ExclusiveMaximum)
	out = appendCount(out, "characters", s.MinLength, s.MaxLength)
	out = appendCount(out, "items", s.MinItems, s.MaxItems)
	out = appendCount(out, "entries", s.MinProperties, s.MaxProperties)
	if s.Pattern != "" && s.Pattern != quantityPattern {
		out = append(out, "matches "+code(s.Pattern))
	}
	switch {
	case s.UniqueItems || (s.XListType != nil && *s.XListType == "set"):
		out = append(out, "items unique")
	case s.XListType != nil && *s.XListType == "map":
		out = append(out, "items unique by "+codeList(s.XListMapKeys))
	}
	if s.Nullable {
		out = append(out, "may be null")
	}
	return out
}

func appendBound(out []string, name string, v *float64, exclusive bool) []string {
	if v == nil {
		return out
	}
	s := name + " " + strconv.FormatFloat(*v, 'f', -1, 64)
	if exclusive {
		s += " (excluded)"
	}
	return append(out, s)
}

func appendCount(out []string, unit string, lo, hi *int64) []string {
	switch {
	case lo != nil && hi != nil:
		return append(out, fmt.Sprintf("%d to %d %s", *lo, *hi, unit))
	case lo != nil:
		return append(out, fmt.Sprintf("at least %d %s", *lo, unit))
	case hi != nil:
		return append(out, fmt.Sprintf("at most %d %s", *hi, unit))
	}
	return out
}

// rule is one CEL rule of a schema, on the field at path.
type rule struct {
	path, rule, message string
}

// rulesOf lists the CEL rules of a schema, the object's own first (shown on the kind's name), then its
// fields' in the order fieldsOf lists them.
func rulesOf(kindName string, root *apiextensionsv1.JSONSchemaProps) []rule {
	out := appendRules(nil, kindName, root)
	for _, name := range sortedNames(root.Properties) {
		if standard[name] {
			continue
		}
		p := root.Properties[name]
		out = appendAllRules(out, name, &p)
	}
	return out
}

func appendAllRules(out []rule, path string, s *apiextensionsv1.JSONSchemaProps) []rule {
	out = appendRules(out, path, s)
	for _, name := range sortedNames(s.Properties) {
		p := s.Properties[name]
		out = appendAllRules(out, path+"."+name, &p)
	}
	if s.Items != nil && s.Items.Schema != nil {
		out = appendAllRules(out, path+"[]", s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		out = appendAllRules(out, path+".*", s.AdditionalProperties.Schema)
	}
	return out
}

var lineBreak = regexp.MustCompile(`\s*\n\s*`)

func appendRules(out []rule, path string, s *apiextensionsv1.JSONSchemaProps) []rule {
	for _, v := range s.XValidations {
		msg := escape(oneLine(v.Message))
		if v.MessageExpression != "" {
			msg = "computed by " + code(lineBreak.ReplaceAllString(v.MessageExpression, " "))
		}
		if msg == "" {
			msg = "none given; the API server says " + code("failed rule: "+lineBreak.ReplaceAllString(v.Rule, " "))
		}
		if v.FieldPath != "" {
			msg += " (on " + code(v.FieldPath) + ")"
		}
		out = append(out, rule{path: path, rule: lineBreak.ReplaceAllString(v.Rule, " "), message: msg})
	}
	return out
}
