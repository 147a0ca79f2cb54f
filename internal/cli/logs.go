package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/view"
)

// The ConfigMap on the hub that says where its endpoint is, and its keys; the chart writes it when
// hub.endpoint.advertiseURL is set, and lets every authenticated user read it.
const (
	endpointConfigMap = "gantry-hub-endpoint"
	endpointURLKey    = "url"
	endpointCAKey     = "ca.crt"
	// omittedHeader is the endpoint's count of the logs a followed request leaves out.
	omittedHeader = "Gantry-Logs-Omitted"
)

type logsFlags struct {
	follow               bool
	podSet, container    string
	tail                 int64
	endpoint, endpointCA string
}

func newLogsCommand(o *Options) *cobra.Command {
	var f logsFlags
	cmd := &cobra.Command{
		Use:   "logs [KIND/]NAME",
		Short: "The logs of a job's pods, read from the worker cluster it runs on through the hub",
		Long: `logs prints the logs of every container of the job's pods, each line prefixed with
[pod/container], merged line by line as they come. The hub reads them on the worker cluster the job
runs on, so you need no credentials for workers: the hub's endpoint takes the bearer token of your
kubeconfig for the hub and shows the logs if you may read pod logs (get pods/log) in the job's
namespace on the hub and get the job itself (jobs.batch, jobsets.jobset.x-k8s.io, ... as its kind
is). A kubeconfig that authenticates with a client certificate only cannot be used: the endpoint takes
tokens (a token, or an exec plugin that returns one).
The endpoint's address is read from the ConfigMap gantry-system/gantry-hub-endpoint on the hub (keys
url and ca.crt), unless --hub-endpoint gives it.
NAME is the name of the job in the namespace, of whichever kind has a job of that name; KIND/NAME
says which kind's when several share it (jobset/train), as for kubectl gantry explain.`,
		Example: `  kubectl gantry logs train-llm -n team-a
  kubectl gantry logs jobset/train-llm --pod-set workers  # the pods of one replicated job
  kubectl gantry logs train-llm -f --tail 20            # the last 20 lines of each, then follow
  kubectl gantry logs train-llm --container trainer
  kubectl gantry logs train-llm --hub-endpoint https://gantry.example.com:8443 --hub-endpoint-ca ca.crt`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: jobNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := view.ParseJobRef(args[0])
			if err != nil {
				return err
			}
			return o.logs(cmd.Context(), ref, f)
		},
	}
	cmd.Flags().BoolVarP(&f.follow, "follow", "f", false, "Go on printing lines as they are written, until the pods end or you stop it.")
	cmd.Flags().StringVar(&f.podSet, "pod-set", "", "Only the pods of this pod set of the job's Workload.")
	cmd.Flags().StringVarP(&f.container, "container", "c", "", "Only this container of each pod (an init container too).")
	cmd.Flags().Int64Var(&f.tail, "tail", -1, "The last lines of each log to show; -1 shows all.")
	f.addEndpointFlags(cmd)
	return cmd
}

// addEndpointFlags adds the flags that say where the hub's endpoint is, instead of its ConfigMap.
func (f *logsFlags) addEndpointFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.endpoint, "hub-endpoint", "", "URL of the hub's endpoint, instead of the one its ConfigMap gantry-system/gantry-hub-endpoint names.")
	cmd.Flags().StringVar(&f.endpointCA, "hub-endpoint-ca", "", "PEM file of the CA that signed the endpoint's certificate, with --hub-endpoint; the system's CAs if empty.")
}

// logs asks the hub's endpoint for the job's logs and copies them to Out until they end, the user stops
// it, or the endpoint goes away.
func (o *Options) logs(ctx context.Context, job view.JobRef, f logsFlags) error {
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	httpc, base, err := o.endpointClient(ctx, f)
	if err != nil {
		return err
	}
	u := logsURL(base, ns, job, f)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := httpc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("reaching the hub's endpoint at %s: %w", base.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("the hub's endpoint answers %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	if n := resp.Header.Get(omittedHeader); n != "" {
		fmt.Fprintf(o.ErrOut, "warning: the hub follows a limited number of logs at once; %s of the job's containers are left out (use --container or --pod-set)\n", n)
	}
	if _, err := io.Copy(o.Out, resp.Body); err != nil && ctx.Err() == nil {
		return fmt.Errorf("reading the logs from the hub's endpoint: %w", err)
	}
	return nil
}

// endpointClient is a client of the hub's endpoint, which the flags or the hub's ConfigMap name, that
// sends the kubeconfig user's token; and the endpoint's URL.
func (o *Options) endpointClient(ctx context.Context, f logsFlags) (*http.Client, *url.URL, error) {
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, nil, err
	}
	base, ca, err := o.findEndpoint(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	rt, err := endpointTransport(cfg, ca)
	if err != nil {
		return nil, nil, err
	}
	return &http.Client{Transport: rt}, base, nil
}

// findEndpoint is the endpoint's URL, and the CA that signed its certificate (nil: the system's), from
// the flags or else from the hub's ConfigMap.
func (o *Options) findEndpoint(ctx context.Context, f logsFlags) (*url.URL, []byte, error) {
	if f.endpoint != "" {
		u, err := endpointURL(f.endpoint)
		if err != nil {
			return nil, nil, fmt.Errorf("--hub-endpoint: %w", err)
		}
		if f.endpointCA == "" {
			return u, nil, nil
		}
		ca, err := os.ReadFile(f.endpointCA)
		if err != nil {
			return nil, nil, fmt.Errorf("--hub-endpoint-ca: %w", err)
		}
		return u, ca, nil
	}
	if f.endpointCA != "" {
		return nil, nil, errors.New("--hub-endpoint-ca goes with --hub-endpoint: the hub's ConfigMap names the CA of the endpoint it advertises")
	}
	c, err := o.NewClient()
	if err != nil {
		return nil, nil, err
	}
	var cm corev1.ConfigMap
	key := client.ObjectKey{Namespace: gantry.GantryNamespace, Name: endpointConfigMap}
	switch err := c.Get(ctx, key, &cm); {
	case apierrors.IsNotFound(err):
		return nil, nil, fmt.Errorf("the hub advertises no endpoint (no ConfigMap %s): its administrator sets hub.endpoint.advertiseURL in Gantry's chart, or give the URL with --hub-endpoint", key)
	case apierrors.IsForbidden(err):
		return nil, nil, fmt.Errorf("you may not read ConfigMap %s on the hub, which names its endpoint (Gantry's chart lets every authenticated user read it): give the URL with --hub-endpoint", key)
	case err != nil:
		return nil, nil, fmt.Errorf("reading ConfigMap %s on the hub: %w", key, err)
	}
	u, err := endpointURL(cm.Data[endpointURLKey])
	if err != nil {
		return nil, nil, fmt.Errorf("ConfigMap %s on the hub, key %s: %w", key, endpointURLKey, err)
	}
	if ca := cm.Data[endpointCAKey]; ca != "" {
		return u, []byte(ca), nil
	}
	return u, nil, nil
}

// endpointURL checks the endpoint's URL: https, or http to a loopback address, since the request carries
// the user's token.
func endpointURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	switch {
	case err != nil:
		return nil, err
	case u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return nil, fmt.Errorf("%q is not an http(s) URL, such as https://gantry.example.com:8443", s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("%q: the URL may have a path but no user, query or fragment", u.Redacted())
	case u.Scheme == "http" && !loopbackHost(u.Hostname()):
		return nil, fmt.Errorf("%q is http to another host: your token would cross the network in the clear (the endpoint serves https, or http on loopback only)", s)
	}
	return u, nil
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// logsURL is the endpoint's URL for the job's logs with what the flags ask.
func logsURL(base *url.URL, ns string, job view.JobRef, f logsFlags) *url.URL {
	u := *base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/logs/" + url.PathEscape(ns) + "/" + url.PathEscape(job.Name)
	q := url.Values{}
	if job.Kind != nil {
		q.Set("kind", string(job.Kind.Name()))
	}
	if f.follow {
		q.Set("follow", "true")
	}
	if f.podSet != "" {
		q.Set("podSet", f.podSet)
	}
	if f.container != "" {
		q.Set("container", f.container)
	}
	if f.tail >= 0 {
		q.Set("tailLines", strconv.FormatInt(f.tail, 10))
	}
	u.RawQuery = q.Encode()
	return &u
}

// endpointTransport sends the bearer token of the user's kubeconfig for the hub (a token, a token file
// or an exec plugin, refreshed as client-go does) to the endpoint, over TLS that trusts ca alone when
// given. What the endpoint cannot take is refused here with what to do instead.
func endpointTransport(cfg *rest.Config, ca []byte) (http.RoundTripper, error) {
	hasToken := cfg.BearerToken != "" || cfg.BearerTokenFile != "" || cfg.ExecProvider != nil || cfg.AuthProvider != nil
	hasCert := len(cfg.CertData) > 0 || cfg.CertFile != "" || len(cfg.KeyData) > 0 || cfg.KeyFile != ""
	switch {
	case cfg.Impersonate.UserName != "" || cfg.Impersonate.UID != "" || len(cfg.Impersonate.Groups) > 0:
		return nil, errors.New("the hub's endpoint shows what the token's own user may read; it does not act for another (--as, --as-group)")
	case !hasToken && hasCert:
		return nil, errors.New("your kubeconfig's user authenticates to the hub with a client certificate, and the hub's endpoint takes bearer tokens only: " +
			"use a kubeconfig whose user has a token or an exec plugin that returns one")
	case !hasToken && cfg.Username != "":
		return nil, errors.New("your kubeconfig's user authenticates to the hub with a password, and the hub's endpoint takes bearer tokens only")
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, errors.New("the endpoint's CA is not PEM certificates")
		}
		tlsConfig.RootCAs = pool
	}
	base := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	// Only the wrappers: the token, its refresh, the user agent; the hub's own TLS settings stay out.
	auth := rest.CopyConfig(cfg)
	auth.CertData, auth.CertFile, auth.KeyData, auth.KeyFile = nil, "", nil, ""
	return rest.HTTPWrappersForConfig(auth, base)
}
