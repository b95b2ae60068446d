package watch

import (
	"context"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"

	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/listing"
)

// RegistryKind is a built-in kind the registry serves and watches
// (CustomResourceDefinitions, Namespaces): how its watch events are
// rendered.
type RegistryKind struct {
	APIVersion, Kind string
	// Printer builds the kind's Table (for as=Table watches).
	Printer func() *listing.TablePrinter
	// MinRequestTimeout bounds a watch without timeoutSeconds.
	MinRequestTimeout time.Duration
}

// OpenRegistry starts the registry's watch of the kind.
type OpenRegistry func(ctx context.Context, req *registryv1.WatchRequest) (recv func() (Event, error), err error)

// ServeRegistry streams a watch of k from the registry: opts are the
// request's parsed options (the caller checked its field selector), name
// the one object watched ("" for all), out and rm how it is rendered.
func ServeRegistry(ctx context.Context, stream gatewayv1.KubeAPIService_WatchServer, k RegistryKind, opts *metainternalversion.ListOptions, name string,
	out httpx.OutputFormat, rm httpx.RequestMeta, open OpenRegistry) error {
	if err := listing.SelectName(opts, name); err != nil {
		return err
	}
	rv, err := listing.ParseRV(opts.ResourceVersion)
	if err != nil {
		return err
	}
	plan := NewPlan(opts, rv, k.MinRequestTimeout)
	plan.APIVersion, plan.Kind, plan.Wire = k.APIVersion, k.Kind, out
	if plan.Transform, err = listing.EventTransform(out, rm, k.Printer); err != nil {
		return err
	}
	wreq := &registryv1.WatchRequest{
		ResourceVersion:   plan.ResourceVersion,
		SendInitialEvents: plan.InitialEvents,
		AllowBookmarks:    plan.AllowBookmarks,
	}
	if opts.LabelSelector != nil && !opts.LabelSelector.Empty() {
		wreq.LabelSelector = opts.LabelSelector.String()
	}
	if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
		wreq.FieldSelector = opts.FieldSelector.String()
	}
	wctx, cancel := context.WithTimeout(ctx, plan.Timeout)
	defer cancel()
	recv, err := open(wctx, wreq)
	if err != nil {
		return err
	}
	return Serve(wctx, stream, plan, recv)
}
