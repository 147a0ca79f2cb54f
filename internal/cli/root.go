// Package cli is kubectl-gantry: the fleet as Gantry sees it, read from the hub with the user's own
// kubeconfig and rights, with kubectl's habits (docs/cli.md). Commands read through Options.NewClient;
// what they show is computed by the pure functions of package view. A list command reads a listing
// (feeds of objects, which -w keeps current with watches) and prints its table, or the objects its rows
// are for, with kubectl get's printers and flags.
package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/component-base/logs"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/version"
	"github.com/gantry-dev/gantry/jobkind"
)

// Options are what every command shares.
type Options struct {
	ConfigFlags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams
	// NewClient reaches the hub; tests give a fake one.
	NewClient func() (client.WithWatch, error)
	// Now is the time ages are counted to; tests fix it.
	Now func() time.Time
}

// NewOptions reads the hub from kubeconfig flags, as kubectl does.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	o := &Options{ConfigFlags: genericclioptions.NewConfigFlags(true), IOStreams: streams, Now: time.Now}
	o.NewClient = func() (client.WithWatch, error) {
		cfg, err := o.ConfigFlags.ToRESTConfig()
		if err != nil {
			return nil, err
		}
		return client.NewWithWatch(cfg, client.Options{Scheme: Scheme()})
	}
	return o
}

func (o *Options) now() time.Time { return o.Now() }

// warn tells the user something on stderr that does not stop the command.
func (o *Options) warn(msg string) { fmt.Fprintln(o.ErrOut, msg) }

// namespace is the one of --namespace, else of the kubeconfig's context, else default.
func (o *Options) namespace() (string, error) {
	ns, _, err := o.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	return ns, nil
}

// namespaceClient is the namespace the kubeconfig and flags name, and a client of the hub.
func (o *Options) namespaceClient() (string, client.Client, error) {
	ns, err := o.namespace()
	if err != nil {
		return "", nil, err
	}
	c, err := o.NewClient()
	return ns, c, err
}

// Scheme holds the kinds the commands read: Gantry's and every kind of job it dispatches.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = gantry.AddToScheme(s)
	_ = jobkind.AddToScheme(s)
	return s
}

// NewRootCommand is kubectl gantry with its subcommands.
func NewRootCommand(o *Options) *cobra.Command {
	root := &cobra.Command{
		Use: "kubectl-gantry",
		// kubectl runs the plugin as kubectl gantry; help and completion say so.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl gantry"},
		Short:       "Gantry's fleet seen from the hub: worker clusters, queues and jobs",
		Long: `kubectl gantry reads the hub cluster of a Gantry fleet with your kubeconfig and your rights,
shows its worker clusters, global queues and jobs, explains why a job waits and where it runs, says
what the dispatcher would do with a job before it is submitted, reports
the GPU-hours each namespace used and what they cost, prints the logs of a job's pods through the hub,
stops and resumes jobs, registers and unregisters worker clusters, and cordons, uncordons or fences
them.`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(o.Out)
	root.SetErr(o.ErrOut)
	o.ConfigFlags.AddFlags(root.PersistentFlags())
	// klog's -v (or --v) and --vmodule, as kubectl has them: -v=6 logs each request to the hub. The
	// version is --version alone.
	logs.AddFlags(root.PersistentFlags())
	root.AddCommand(newClustersCommand(o), newQueuesCommand(o), newJobsCommand(o), newWorkloadsCommand(o),
		newExplainCommand(o), newWhatIfCommand(o), newUsageCommand(o))
	root.AddCommand(newStateCommands(o)...)
	root.AddCommand(newHoldCommands(o)...)
	root.AddCommand(newStopCommands(o)...)
	root.AddCommand(newLogsCommand(o))
	root.AddCommand(newRegistrationCommands(o)...)
	return root
}

func versionString() string {
	v, commit := version.Get()
	return fmt.Sprintf("%s (commit %s)", v, commit)
}
