package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime/serializer"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub"
	"github.com/gantry-dev/gantry/hub/dispatcher"
	"github.com/gantry-dev/gantry/hub/endpoint"
	"github.com/gantry-dev/gantry/hub/remote"
	"github.com/gantry-dev/gantry/hub/visibility"
	"github.com/gantry-dev/gantry/hub/web"
)

// Bounds of the log streams the endpoint reads from workers: per request, and for all requests.
const (
	endpointStreamsPerRequest = 16
	endpointStreams           = 256
)

func bindEndpointFlags(fs *flag.FlagSet, o *endpoint.Options) {
	fs.StringVar(&o.BindAddress, "endpoint-bind-address", "", "Address of the endpoint that serves users the logs of their jobs (kubectl gantry logs) and what waits with its positions (the visibility API); empty leaves it off. "+
		"Any address but a loopback one needs --endpoint-tls-cert-file and --endpoint-tls-key-file.")
	fs.StringVar(&o.CertFile, "endpoint-tls-cert-file", "", "PEM certificate (chain) the endpoint serves HTTPS with; read again when it changes.")
	fs.StringVar(&o.KeyFile, "endpoint-tls-key-file", "", "PEM private key of --endpoint-tls-cert-file.")
	fs.BoolVar(&o.Page, "endpoint-page", false, "Serve the hub's live page on the endpoint too: the fleet at a glance and each job's story, "+
		"to users who log in with a token, showing what the hub's RBAC lets them read.")
}

// addEndpoint serves the endpoint, when it is on, on every replica. base is the hub's config outside
// the leader Guard: the token and access reviews are POSTs that change nothing, and the standby
// answers them too.
func addEndpoint(mgr ctrl.Manager, base *rest.Config, o endpoint.Options, h *hub.Hub) error {
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
	workers := &remote.PodLogs{Hub: mgr.GetClient(), Access: h.Access}
	// One Authorizer, so that the logs and the page share its memory of recent answers.
	allowed := endpoint.Authorizer(authz.SubjectAccessReviews())
	logs := &endpoint.Logs{Hub: mgr.GetClient(), Allowed: allowed, Workers: workers,
		MaxStreams: endpointStreamsPerRequest, MaxTotal: endpointStreams}
	cfg := endpoint.Config{Reviews: authn.TokenReviews(), Logs: logs, SecureCookies: o.CertFile != ""}
	positions := visibility.NewIndex(time.Now)
	if err := positions.Follow(context.Background(), mgr.GetCache()); err != nil {
		return err
	}
	cfg.Visibility = &visibility.Handler{Index: positions, Allowed: allowed, WhatIf: whatIf(mgr, h, allowed)}
	if o.Page {
		page, err := addPage(mgr, allowed, positions)
		if err != nil {
			return err
		}
		cfg.Page = page
	}
	return mgr.Add(&endpoint.Server{Options: o, Handler: endpoint.NewHandler(cfg)})
}

// whatIf answers what-if requests over the hub's cache, with the connections of the hub when this
// replica leads.
func whatIf(mgr ctrl.Manager, h *hub.Hub, allowed web.Access) *visibility.WhatIf {
	leading := func() bool {
		select {
		case <-mgr.Elected():
			return true
		default:
			return false
		}
	}
	predictor := dispatcher.NewPredictor(mgr.GetClient(), h.Connections, leading, clock.RealClock{})
	predictor.RejectionTTL = h.Dispatcher.RejectionTTL
	return &visibility.WhatIf{Decoder: serializer.NewCodecFactory(mgr.GetScheme()).UniversalDeserializer(), Hub: mgr.GetClient(),
		Predictor: predictor, Allowed: allowed}
}

// addPage makes the hub's page, reading the manager's cache, and tells open pages of every change the
// cache sees of the kinds it shows (on every replica: the standby's cache follows the API server too).
// Workloads and Queues reach pages through the page's Table, at most once per web.RefreshInterval.
func addPage(mgr ctrl.Manager, allowed web.Access, positions *visibility.Index) (http.Handler, error) {
	changes := &web.Changes{}
	table := web.NewTable(positions, time.Now)
	if err := table.Follow(context.Background(), mgr.GetCache()); err != nil {
		return nil, err
	}
	h := &web.Handler{Cache: mgr.GetCache(), Table: table, Allowed: allowed, Changes: changes, Now: time.Now}
	kinds, err := hub.ServedKinds(mgr)
	if err != nil {
		return nil, err
	}
	// A Usage's write changes the page's GPU-hours (a run moves into its count; days pass).
	watched := []client.Object{&gantry.WorkerCluster{}, &gantry.GlobalQueue{}, &gantry.Usage{}}
	for _, k := range kinds {
		watched = append(watched, k.New()) // a job's mirrored status changes its page
	}
	watch := func(ctx context.Context) error {
		if err := web.Watch(ctx, mgr.GetCache(), changes, watched...); err != nil {
			return fmt.Errorf("watching the hub's cache for the page: %w", err)
		}
		return table.Run(ctx, changes)
	}
	if err := mgr.Add(everyReplica(watch)); err != nil {
		return nil, err
	}
	return h.Routes(), nil
}

// everyReplica is a runnable that runs on the standby too.
type everyReplica func(ctx context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }
