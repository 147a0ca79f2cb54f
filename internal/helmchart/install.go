package helmchart

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// Releases installs, upgrades and uninstalls the chart's release in one cluster, as helm install,
// upgrade and uninstall do: server-side apply, release records in Secrets of the namespace, and a wait
// until what was applied is ready (Deployments Available) or removed.
type Releases struct {
	cfg       *action.Configuration
	namespace string
	// Wait bounds each wait; 0 does not wait.
	Wait time.Duration
}

// NewReleases reaches the cluster of the kubeconfig file.
func NewReleases(kubeconfig, namespace string) (*Releases, error) {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &namespace
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		return nil, fmt.Errorf("helm configuration for %s: %w", kubeconfig, err)
	}
	return &Releases{cfg: cfg, namespace: namespace, Wait: 3 * time.Minute}, nil
}

// Install installs the release. takeOwnership adopts objects of the same names already there (such as
// those applied from deploy/ before), and the fields other managers set on them.
func (r *Releases) Install(ctx context.Context, ch *chart.Chart, values map[string]any, takeOwnership bool) error {
	install := action.NewInstall(r.cfg)
	install.ReleaseName, install.Namespace = ReleaseName, r.namespace
	install.ServerSideApply, install.TakeOwnership, install.ForceConflicts = true, takeOwnership, takeOwnership
	install.WaitStrategy, install.Timeout = r.strategy(), r.Wait
	if _, err := install.RunWithContext(ctx, ch, values); err != nil {
		return fmt.Errorf("installing %s: %w", ReleaseName, err)
	}
	return nil
}

// Upgrade upgrades the release to ch with values (the values of the last release are not reused).
func (r *Releases) Upgrade(ctx context.Context, ch *chart.Chart, values map[string]any) error {
	upgrade := action.NewUpgrade(r.cfg)
	upgrade.Namespace, upgrade.ServerSideApply = r.namespace, "auto"
	upgrade.WaitStrategy, upgrade.Timeout = r.strategy(), r.Wait
	if _, err := upgrade.RunWithContext(ctx, ReleaseName, ch, values); err != nil {
		return fmt.Errorf("upgrading %s: %w", ReleaseName, err)
	}
	return nil
}

// Uninstall removes the release's objects; the CRDs of crds/, and so every object of Gantry's kinds,
// stay.
func (r *Releases) Uninstall() error {
	uninstall := action.NewUninstall(r.cfg)
	uninstall.WaitStrategy, uninstall.Timeout = r.strategy(), r.Wait
	uninstall.IgnoreNotFound = true
	if _, err := uninstall.Run(ReleaseName); err != nil {
		return fmt.Errorf("uninstalling %s: %w", ReleaseName, err)
	}
	return nil
}

func (r *Releases) strategy() kube.WaitStrategy {
	if r.Wait == 0 {
		return kube.HookOnlyStrategy
	}
	return kube.StatusWatcherStrategy
}
