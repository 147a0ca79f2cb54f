package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"

	visibility "github.com/gantry-dev/gantry/apis/visibility/v1beta1"
	"github.com/gantry-dev/gantry/internal/manifest"
	"github.com/gantry-dev/gantry/internal/view"
)

const whatIfLong = `whatif asks the hub what its dispatcher would do with the job in FILE were it submitted now:
dispatch it (where to), preempt other workloads for it, or make it wait (why, and when it would most
likely start); then how each cluster of its GlobalQueue judges it.
It creates nothing, but needs the right to create that kind of job in the namespace on the hub.
FILE holds one job (Job, JobSet, RayJob or TrainJob), in YAML or JSON; -f - reads the standard input.
Its namespace is its metadata.namespace, else --namespace or the kubeconfig's.
The hub's endpoint answers, as for kubectl gantry logs: its address comes from the hub unless
--hub-endpoint gives it. -o json and -o yaml print its answer, a WhatIf of ` + visibility.Group + "/" + visibility.Version + `.`

// whatIfOutputs are the formats of whatif's -o.
var whatIfOutputs = []string{"table", "json", "yaml"}

type whatIfFlags struct {
	filename, output string
	// endpoint holds --hub-endpoint and --hub-endpoint-ca.
	endpoint logsFlags
}

func newWhatIfCommand(o *Options) *cobra.Command {
	var f whatIfFlags
	cmd := &cobra.Command{
		Use:   "whatif -f FILE",
		Short: "What the dispatcher would do with a job submitted now, and when it would most likely start; creates nothing",
		Long:  whatIfLong,
		Example: `  kubectl gantry whatif -f train.yaml
  kubectl gantry whatif -f train.yaml -n team-a -o yaml
  cat train.yaml | kubectl gantry whatif -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(whatIfOutputs, f.output) {
				return fmt.Errorf("bad --output %q: want one of %s", f.output, strings.Join(whatIfOutputs, ", "))
			}
			return o.whatIf(cmd.Context(), f)
		},
	}
	cmd.Flags().StringVarP(&f.filename, "filename", "f", "", "File that holds the job, in YAML or JSON; - reads the standard input.")
	cmd.Flags().StringVarP(&f.output, "output", "o", "table", "Output format: "+strings.Join(whatIfOutputs, ", ")+".")
	f.endpoint.addEndpointFlags(cmd)
	_ = cmd.MarkFlagRequired("filename")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return whatIfOutputs, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// whatIfJob is the job of the file: its bytes, sent as they are, and its namespace.
type whatIfJob struct {
	data      []byte
	namespace string
}

func (o *Options) whatIf(ctx context.Context, f whatIfFlags) error {
	job, err := o.readWhatIfJob(f.filename)
	if err != nil {
		return err
	}
	ns, err := o.whatIfNamespace(job.namespace)
	if err != nil {
		return err
	}
	answer, err := o.askWhatIf(ctx, f.endpoint, ns, job)
	if err != nil {
		return err
	}
	return o.printWhatIf(answer, f.output)
}

// readWhatIfJob reads the file, which must hold exactly one object: the endpoint judges one job.
func (o *Options) readWhatIfJob(filename string) (*whatIfJob, error) {
	var data []byte
	var err error
	name := filename
	if filename == "-" {
		name = "the standard input"
		if o.In == nil {
			return nil, errors.New("-f -: there is no standard input to read")
		}
		data, err = io.ReadAll(o.In)
	} else {
		data, err = os.ReadFile(filename)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the job: %w", err)
	}
	objs, err := manifest.Decode(data)
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading the job of %s: %w", name, err)
	case len(objs) == 0:
		return nil, fmt.Errorf("%s holds no object: whatif takes one job", name)
	case len(objs) > 1:
		return nil, fmt.Errorf("%s holds %d objects: whatif takes one job, so give each its own file", name, len(objs))
	}
	return &whatIfJob{data: data, namespace: objs[0].GetNamespace()}, nil
}

// whatIfNamespace is the file's namespace, else the one of --namespace or the kubeconfig. A file and a
// --namespace that disagree are refused, as kubectl create does, rather than one silently winning.
func (o *Options) whatIfNamespace(fileNamespace string) (string, error) {
	if fileNamespace == "" {
		return o.namespace()
	}
	if flag := o.ConfigFlags.Namespace; flag != nil && *flag != "" && *flag != fileNamespace {
		return "", fmt.Errorf("the job's metadata.namespace is %s and --namespace is %s: drop one, or make them agree", fileNamespace, *flag)
	}
	return fileNamespace, nil
}

// askWhatIf posts the job to the hub's endpoint and returns its answer, a WhatIf in JSON.
func (o *Options) askWhatIf(ctx context.Context, f logsFlags, ns string, job *whatIfJob) (json.RawMessage, error) {
	httpc, base, err := o.endpointClient(ctx, f)
	if err != nil {
		return nil, err
	}
	u := base.JoinPath("apis", visibility.Group, visibility.Version, "namespaces", ns, "whatif")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(job.data))
	if err != nil {
		return nil, err
	}
	// JSON is YAML too, so the file goes as it is under one content type.
	req.Header.Set("Content-Type", "application/yaml")
	var answer json.RawMessage
	if err := askEndpoint(httpc, base, req, &answer); err != nil {
		return nil, err
	}
	return answer, nil
}

// printWhatIf prints the answer as text, or as the endpoint sent it in JSON or YAML.
func (o *Options) printWhatIf(answer json.RawMessage, output string) error {
	if output == "table" {
		var w visibility.WhatIf
		if err := json.Unmarshal(answer, &w); err != nil {
			return fmt.Errorf("reading the hub's answer: %w", err)
		}
		_, err := fmt.Fprint(o.Out, view.WhatIfText(&w))
		return err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(answer); err != nil {
		return fmt.Errorf("reading the hub's answer: %w", err)
	}
	if output == "json" {
		return (&printers.JSONPrinter{}).PrintObj(u, o.Out)
	}
	return (&printers.YAMLPrinter{}).PrintObj(u, o.Out)
}

// askEndpoint sends req to the hub's endpoint at base and decodes its JSON answer into out.
func askEndpoint(httpc *http.Client, base *url.URL, req *http.Request, out any) error {
	resp, err := httpc.Do(req)
	if err != nil {
		return fmt.Errorf("reaching the hub's endpoint at %s: %w", base.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("the hub's endpoint answers %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("reading the hub's answer: %w", err)
	}
	return nil
}
