// Package metricsendpoint sets up how the hub and the agent serve /metrics: by default over HTTPS, to
// callers their cluster authenticates (TokenReview) and allows to get the non-resource URL /metrics
// (SubjectAccessReview), as Kubernetes' own components serve theirs.
package metricsendpoint

import (
	"flag"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Flags are the metrics endpoint's flags, the same in both programs.
type Flags struct {
	BindAddress string
	Secure      bool
	CertDir     string
}

// Bind registers the flags on fs.
func (f *Flags) Bind(fs *flag.FlagSet) {
	fs.StringVar(&f.BindAddress, "metrics-bind-address", ":8080", `Address of the Prometheus metrics endpoint; "0" disables it.`)
	fs.BoolVar(&f.Secure, "metrics-secure", true, "Serve /metrics over HTTPS (the certificate of --metrics-cert-dir, else a self-signed one) "+
		"to callers the cluster authenticates and allows to get /metrics; false serves plain HTTP to anyone who reaches the address.")
	fs.StringVar(&f.CertDir, "metrics-cert-dir", "", "Directory of the metrics endpoint's certificate (tls.crt, tls.key); empty for a self-signed one.")
}

// Options are the metrics server's options the flags say.
func (f Flags) Options() metricsserver.Options {
	o := metricsserver.Options{BindAddress: f.BindAddress}
	if f.Secure {
		o.SecureServing = true
		o.CertDir = f.CertDir
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}
