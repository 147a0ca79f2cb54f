// Command chart installs, upgrades and uninstalls Gantry's Helm chart with the Helm SDK, for hosts
// without a helm binary (the kind path uses it):
//
//	go run ./hack/chart install --kubeconfig hub.kubeconfig --set role=hub
//	go run ./hack/chart install --kubeconfig w1.kubeconfig --set role=agent --set agent.clusterName=worker-1
//	go run ./hack/chart upgrade --kubeconfig hub.kubeconfig -f my-values.yaml
//	go run ./hack/chart uninstall --kubeconfig hub.kubeconfig
//
// The release is gantry in gantry-system, as with helm install gantry deploy/charts/gantry -n gantry-system.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/strvals"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/internal/helmchart"
)

// repeated is a flag given any number of times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || (args[0] != "install" && args[0] != "upgrade" && args[0] != "uninstall") {
		return errors.New("usage: chart install|upgrade|uninstall --kubeconfig FILE [-f values.yaml] [--set key=value]")
	}
	verb := args[0]
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "Kubeconfig of the cluster; required.")
	chartDir := fs.String("chart", "deploy/charts/gantry", "The chart's directory.")
	wait := fs.Duration("wait", 5*time.Minute, "How long to wait for the Deployments to become Available, or for the objects to go; 0 does not wait.")
	takeOwnership := fs.Bool("take-ownership", false, "install: adopt objects of the same names already there (applied from deploy/ before).")
	var files, sets repeated
	fs.Var(&files, "f", "A values file; may be repeated.")
	fs.Var(&sets, "set", "A value, key=value as with helm --set; may be repeated.")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *kubeconfig == "" {
		return errors.New("--kubeconfig is required: the chart is never installed into a default cluster")
	}
	releases, err := helmchart.NewReleases(*kubeconfig, helmchart.Namespace)
	if err != nil {
		return err
	}
	releases.Wait = *wait
	if verb == "uninstall" {
		return releases.Uninstall()
	}
	values, err := readValues(files, sets)
	if err != nil {
		return err
	}
	ch, err := helmchart.Load(*chartDir)
	if err != nil {
		return err
	}
	if verb == "install" {
		return releases.Install(context.Background(), ch, values, *takeOwnership)
	}
	return releases.Upgrade(context.Background(), ch, values)
}

// readValues merges the files in order, then the --set values over them.
func readValues(files, sets []string) (map[string]any, error) {
	values := map[string]any{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var v map[string]any
		if err := yaml.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		merge(values, v)
	}
	for _, s := range sets {
		if err := strvals.ParseInto(s, values); err != nil {
			return nil, fmt.Errorf("--set %s: %w", s, err)
		}
	}
	return values, nil
}

func merge(dst, src map[string]any) {
	for k, v := range src {
		if sub, ok := v.(map[string]any); ok {
			if d, ok := dst[k].(map[string]any); ok {
				merge(d, sub)
				continue
			}
		}
		dst[k] = v
	}
}
