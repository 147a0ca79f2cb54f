// Package namespace carries Gantry's namespace (namespace.yaml, rendered from the chart) into the
// programs that apply it.
package namespace

import _ "embed"

// Namespace is namespace.yaml: gantry-system, which enforces the restricted Pod Security level.
//
//go:embed namespace.yaml
var Namespace []byte
