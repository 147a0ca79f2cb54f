// Package worker carries the objects of the hub's access to a worker cluster (hub-access.yaml, rendered
// from the chart) into the programs that apply them.
package worker

import _ "embed"

// HubAccess is hub-access.yaml: the ServiceAccount gantry-hub-remote and its rights on a worker.
//
//go:embed hub-access.yaml
var HubAccess []byte
