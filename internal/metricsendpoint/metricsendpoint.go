// Package metricsendpoint sets up how the hub and the agent serve /metrics: by default over HTTPS, to
// callers their cluster authenticates (TokenReview) and allows to get the non-resource URL /metrics
// (SubjectAccessReview), as Kubernetes' own components serve theirs.
package metricsendpoint

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// SecureUsage is the --metrics-secure flag's help, the same for both programs.
const SecureUsage = "Serve /metrics over HTTPS (a certificate from --metrics-cert-dir, else a self-signed one) to callers " +
	"the cluster authenticates and allows to get /metrics; false serves plain HTTP to anyone who reaches the address."

// Options serves the metrics on bindAddress ("0" for none); secure as SecureUsage says, with the
// certificate (tls.crt, tls.key) of certDir when it holds one.
func Options(bindAddress string, secure bool, certDir string) metricsserver.Options {
	o := metricsserver.Options{BindAddress: bindAddress}
	if secure {
		o.SecureServing = true
		o.CertDir = certDir
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}
