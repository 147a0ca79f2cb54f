// Package controller is the Gantry agent: it runs in a worker cluster, admits the Workload copies the hub
// dispatches there and publishes the cluster's CapacityReport.
//
// One pass does all of it. Any change to a copy, Node, Pod or Job queues the single pass key (changes
// that arrive while a pass runs are coalesced into the next one). A pass reads the informer caches,
// decides in memory (Decide: build an admission.Snapshot, reserve the copies admitted earlier, run
// admission.Snapshot.Admit over the others) and then writes: the copies' Admitted conditions first, then
// the CapacityReport, computed from the snapshot after the admissions that were actually written.
//
// Entry points: NewReconciler and (*Reconciler).SetupWithManager wire the pass into a controller-runtime
// manager whose cache was built with CacheOptions; Decide and the conversion helpers are pure functions.
package controller
