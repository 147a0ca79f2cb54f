package jobs

import (
	"context"
	"fmt"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
)

// InvalidJobError is what is wrong with the job itself, as opposed to a failed request.
type InvalidJobError struct{ error }

// NewWorkload builds the Workload of a job of the kind from the job and what it refers to on the hub
// (its pods' PriorityClass, a TrainJob's runtime), read with c. An InvalidJobError says what is wrong
// with the job.
func NewWorkload(ctx context.Context, c client.Client, kind jobkind.Kind, job client.Object) (*gantry.Workload, error) {
	kind, err := readReference(ctx, c, kind, job)
	if err != nil {
		return nil, err
	}
	priority, err := priority(ctx, c, kind, job)
	if err != nil {
		return nil, err
	}
	wl, err := jobkind.NewWorkload(kind, job, priority)
	if err != nil {
		return nil, InvalidJobError{err}
	}
	return wl, nil
}

// readReference is the job's kind, with the object its pods are described by read, for a kind whose
// pods are described partly elsewhere.
func readReference(ctx context.Context, c client.Client, kind jobkind.Kind, job client.Object) (jobkind.Kind, error) {
	referrer, ok := kind.(jobkind.Referrer)
	if !ok {
		return kind, nil
	}
	ref, err := referrer.Reference(job)
	if err != nil {
		return nil, InvalidJobError{err}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ref), ref); err != nil {
		gvk, _ := c.GroupVersionKindFor(ref)
		kind := gvk.Kind
		if apierrors.IsNotFound(err) {
			return nil, InvalidJobError{fmt.Errorf("%s %q not found on the hub", kind, ref.GetName())}
		}
		return nil, fmt.Errorf("reading %s %q: %w", kind, ref.GetName(), err)
	}
	return referrer.WithReference(ref), nil
}

func priority(ctx context.Context, c client.Reader, kind jobkind.Kind, job client.Object) (int32, error) {
	name := jobkind.PriorityClassName(kind, job)
	if name == "" {
		return 0, nil
	}
	var pc schedulingv1.PriorityClass
	if err := c.Get(ctx, types.NamespacedName{Name: name}, &pc); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, InvalidJobError{fmt.Errorf("PriorityClass %q of the pod template not found", name)}
		}
		return 0, fmt.Errorf("reading PriorityClass %q: %w", name, err)
	}
	return pc.Value, nil
}
