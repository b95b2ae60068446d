package gateway

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/metrics"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// backendEvent is one event of a storage or registry watch.
type backendEvent interface {
	GetType() commonv1.EventType
	GetObject() []byte
	GetResourceVersion() int64
}

// watchPlan is what a watch asks of its backend and how its events are
// rendered; custom resources and CRDs share it.
type watchPlan struct {
	apiVersion string // of the objects and bookmarks sent
	kind       string
	// resourceVersion is where the backend starts (0: now).
	resourceVersion int64
	// initialEvents asks the backend for ADDED events of the current state
	// first, ended by one BOOKMARK.
	initialEvents bool
	// watchList is set when the client asked sendInitialEvents=true: the
	// end of the initial events is sent as a BOOKMARK annotated
	// k8s.io/initial-events-end.
	watchList      bool
	allowBookmarks bool
	timeout        time.Duration
	// convert rewrites an object to the request version (nil: as is).
	convert func(ctx context.Context, obj []byte) ([]byte, error)
	// transform renders an event's object as the client asked (Table,
	// PartialObjectMetadata; nil: as is). Bookmarks go through it too.
	transform func(obj []byte) ([]byte, error)
	// wire is the stream's encoding: JSON lines or protobuf frames.
	wire httpx.OutputFormat
}

// watchTransform is the per-event transformation a watch's negotiated
// format asks for (nil: none). A Table watch sends the column
// definitions with its first event only, as upstream.
func watchTransform(out httpx.OutputFormat, rm httpx.RequestMeta, printer func() *tablePrinter) (func([]byte) ([]byte, error), error) {
	switch out.As {
	case httpx.AsTable:
		opts, err := tableOptions(rm.Query())
		if err != nil {
			return nil, err
		}
		tw := &tableWriter{printer: printer(), opts: opts, gv: out.AsGV}
		return func(obj []byte) ([]byte, error) {
			doc, err := tw.table([][]byte{obj}, metav1.ListMeta{ResourceVersion: objectResourceVersion(obj)})
			tw.noHeaders = true
			return doc, err
		}, nil
	case httpx.AsPartialObjectMetadata:
		return func(obj []byte) ([]byte, error) {
			o, err := decodeObject(obj)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			return partialObjectMetadata(o, out.AsGV)
		}, nil
	}
	// PartialObjectMetadataList of single objects fails upstream, which
	// then sends the objects as they are.
	return nil, nil
}

// planWatch derives the backend request and rendering from validated
// options: resourceVersion ""/"0" starts with the current state (unless
// sendInitialEvents=false), N follows the changes after N.
func planWatch(opts *metainternalversion.ListOptions, rv int64, minTimeout time.Duration) watchPlan {
	p := watchPlan{resourceVersion: rv, allowBookmarks: opts.AllowWatchBookmarks}
	legacy := opts.ResourceVersion == "" || opts.ResourceVersion == "0"
	switch {
	case opts.SendInitialEvents != nil:
		p.initialEvents = *opts.SendInitialEvents
		p.watchList = *opts.SendInitialEvents
	default:
		p.initialEvents = legacy
	}
	if legacy {
		p.resourceVersion = 0
	}
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		p.timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	} else {
		p.timeout = time.Duration(float64(minTimeout) * (1 + rand.Float64()))
	}
	return p
}

// serveWatch streams a backend watch to the client as Kubernetes watch
// events. The first message is empty so the HTTP headers (200,
// application/json) go out at once. It ends cleanly when the timeout
// passes, the client goes away or the backend closes the stream; a backend
// error becomes a final ERROR event carrying its Status (e.g. 410 Expired).
func serveWatch(ctx context.Context, out gatewayv1.KubeAPIService_WatchServer, p watchPlan, recv func() (backendEvent, error)) error {
	contentType := p.wire.WatchContentType()
	if err := out.Send(&httpbody.HttpBody{ContentType: contentType}); err != nil {
		return nil
	}
	// The backend is read ahead so that a frame is flushed only when no
	// other event is waiting (as kube-apiserver does): a burst goes out in
	// few writes.
	type received struct {
		ev  backendEvent
		err error
	}
	events := make(chan received, 64)
	go func() {
		for {
			ev, err := recoverRecv(recv)
			select {
			case events <- received{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	fw, buffered := out.(frameWriter)
	unflushed := false
	send := func(frame []byte) error {
		if buffered {
			unflushed = true
			return fw.WriteFrame(frame)
		}
		return out.Send(&httpbody.HttpBody{ContentType: contentType, Data: frame})
	}
	sendError := func(err error) {
		if buffered {
			if fw.WriteFrame(p.wire.WatchErrorFrame(err)) == nil {
				_ = fw.Flush()
			}
			return
		}
		_ = out.Send(&httpbody.HttpBody{ContentType: contentType, Data: p.wire.WatchErrorFrame(err)})
	}
	inInitial := p.initialEvents
	for {
		var r received
		select {
		case r = <-events:
		default:
			// Nothing waiting: what was written goes out before blocking.
			if unflushed {
				if err := fw.Flush(); err != nil {
					return nil
				}
				unflushed = false
			}
			select {
			case r = <-events:
			case <-ctx.Done():
				return nil
			}
		}
		ev, err := r.ev, r.err
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil || isStreamEnd(err) {
				return nil
			}
			sendError(err)
			return nil
		}
		var frame []byte
		switch ev.GetType() {
		case commonv1.EventType_EVENT_TYPE_BOOKMARK:
			if inInitial {
				inInitial = false
				if !p.watchList {
					continue
				}
				frame, err = p.frame(httpx.EventBookmark, httpx.BookmarkObject(p.apiVersion, p.kind, ev.GetResourceVersion(), true))
				break
			}
			if !p.allowBookmarks {
				continue
			}
			frame, err = p.frame(httpx.EventBookmark, httpx.BookmarkObject(p.apiVersion, p.kind, ev.GetResourceVersion(), false))
		case commonv1.EventType_EVENT_TYPE_ADDED, commonv1.EventType_EVENT_TYPE_MODIFIED, commonv1.EventType_EVENT_TYPE_DELETED:
			obj := ev.GetObject()
			if p.convert != nil {
				if obj, err = p.convert(ctx, obj); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					sendError(err)
					return nil
				}
			}
			frame, err = p.frame(eventTypeName(ev.GetType()), obj)
		default:
			continue
		}
		if err != nil {
			sendError(err)
			return nil
		}
		if err := send(frame); err != nil {
			return nil
		}
	}
}

// frameWriter is a watch stream that can hold frames back until a flush
// (the HTTP watch stream).
type frameWriter interface {
	WriteFrame(frame []byte) error
	Flush() error
}

// frame renders one event, its object transformed as negotiated.
func (p *watchPlan) frame(eventType string, obj []byte) ([]byte, error) {
	if p.transform != nil {
		var err error
		if obj, err = p.transform(obj); err != nil {
			return nil, err
		}
	}
	return p.wire.WatchFrame(eventType, obj)
}

func eventTypeName(t commonv1.EventType) string {
	switch t {
	case commonv1.EventType_EVENT_TYPE_ADDED:
		return httpx.EventAdded
	case commonv1.EventType_EVENT_TYPE_MODIFIED:
		return httpx.EventModified
	case commonv1.EventType_EVENT_TYPE_DELETED:
		return httpx.EventDeleted
	case commonv1.EventType_EVENT_TYPE_BOOKMARK:
		return httpx.EventBookmark
	}
	return httpx.EventError
}

// isStreamEnd reports errors that only mean the watch context ended. A
// backend's Status with such a code (a 504 "Too large resource version")
// is an error for the client, not an end.
func isStreamEnd(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded:
		for _, d := range st.Details() {
			if _, isStatus := d.(*commonv1.KubeStatus); isStatus {
				return false
			}
		}
		return true
	}
	return false
}

// recoverRecv calls recv, a watch's reader of backend events, which runs
// in a goroutine of its own: a panic there would end the process. It ends
// the watch with an ERROR event (a 500 Status) instead.
func recoverRecv(recv func() (backendEvent, error)) (ev backendEvent, err error) {
	defer func() {
		if v := recover(); v != nil {
			metrics.RecordPanic("gateway", v, "in", "watch")
			ev, err = nil, apierrors.NewInternalError(errors.New(httpx.PanicMessage)) //nolint:staticcheck // kube-apiserver's wording, period included
		}
	}()
	return recv()
}
