package main

import (
	"flag"

	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gantry-dev/gantry/hub/endpoint"
	"github.com/gantry-dev/gantry/hub/remote"
)

// Bounds of the log streams the endpoint reads from workers: per request, and for all requests.
const (
	endpointStreamsPerRequest = 16
	endpointStreams           = 256
)

func bindEndpointFlags(fs *flag.FlagSet, o *endpoint.Options) {
	fs.StringVar(&o.BindAddress, "endpoint-bind-address", "", "Address of the endpoint that serves users the logs of their jobs (kubectl gantry logs); empty leaves it off. "+
		"Any address but a loopback one needs --endpoint-tls-cert-file and --endpoint-tls-key-file.")
	fs.StringVar(&o.CertFile, "endpoint-tls-cert-file", "", "PEM certificate (chain) the endpoint serves HTTPS with; read again when it changes.")
	fs.StringVar(&o.KeyFile, "endpoint-tls-key-file", "", "PEM private key of --endpoint-tls-cert-file.")
}

// addEndpoint serves the endpoint, when it is on, on every replica. base is the hub's config outside
// the leader Guard: the token and access reviews are POSTs that change nothing, and the standby
// answers them too.
func addEndpoint(mgr ctrl.Manager, base *rest.Config, o endpoint.Options, namespace string, policy remote.Policy) error {
	if o.BindAddress == "" {
		return nil
	}
	authn, err := authenticationv1client.NewForConfig(base)
	if err != nil {
		return err
	}
	authz, err := authorizationv1client.NewForConfig(base)
	if err != nil {
		return err
	}
	workers := &remote.PodLogs{Hub: mgr.GetClient(), Namespace: namespace, Policy: policy, HubHost: mgr.GetConfig().Host}
	logs := &endpoint.Logs{Hub: mgr.GetClient(), Allowed: endpoint.Authorizer(authz.SubjectAccessReviews()), Workers: workers,
		MaxStreams: endpointStreamsPerRequest, MaxTotal: endpointStreams}
	return mgr.Add(&endpoint.Server{Options: o,
		Handler: endpoint.NewHandler(endpoint.Config{Reviews: authn.TokenReviews(), Logs: logs})})
}
