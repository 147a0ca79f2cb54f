package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	visibility "github.com/gantry-dev/gantry/apis/visibility/v1beta1"
	"github.com/gantry-dev/gantry/internal/view"
)

// maxVisibilityPages bounds how many pages of the visibility API a list reads: at its largest page,
// 100,000 Workloads of one namespace.
const maxVisibilityPages = 100

// visibilityPositions reads the positions of the namespace's pending Workloads from the hub's
// visibility API, which counts them among every namespace's, as the dispatcher takes them.
func (o *Options) visibilityPositions(ctx context.Context, ns string) (map[string]view.Position, error) {
	httpc, base, err := o.endpointClient(ctx, logsFlags{})
	if err != nil {
		return nil, err
	}
	out := map[string]view.Position{}
	next := ""
	for range maxVisibilityPages {
		page, err := visibilityPage(ctx, httpc, base, ns, next)
		if err != nil {
			return nil, err
		}
		for _, w := range page.Items {
			if w.GlobalQueue != "" {
				out[w.Namespace+"/"+w.Name] = view.Position{GlobalQueue: w.GlobalQueue, Index: w.PositionInGlobalQueue, Of: w.PendingInGlobalQueue}
			}
		}
		if next = page.Continue; next == "" {
			return out, nil
		}
	}
	return nil, fmt.Errorf("more than %d pages of pending workloads", maxVisibilityPages)
}

func visibilityPage(ctx context.Context, httpc *http.Client, base *url.URL, ns, next string) (*visibility.PendingWorkloadList, error) {
	u := base.JoinPath("apis", visibility.Group, visibility.Version, "namespaces", ns, "pendingworkloads")
	q := url.Values{"limit": {"1000"}}
	if next != "" {
		q.Set("continue", next)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	var list visibility.PendingWorkloadList
	if err := askEndpoint(httpc, base, req, &list); err != nil {
		return nil, err
	}
	return &list, nil
}
