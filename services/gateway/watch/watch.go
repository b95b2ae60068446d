// Package watch streams Kubernetes watches of custom resources and CRDs:
// the plan a watch's options ask for, and the events of a backend (storage
// or registry) watch framed as JSON lines or protobuf frames.
package watch

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

	"github.com/crdplane/crdplane/pkg/metrics"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// Event is one event of a storage or registry watch.
type Event interface {
	GetType() commonv1.EventType
	GetObject() []byte
	GetResourceVersion() int64
}

// Plan is what a watch asks of its backend and how its events are
// rendered; custom resources and CRDs share it.
type Plan struct {
	APIVersion string // of the objects and bookmarks sent
	Kind       string
	// ResourceVersion is where the backend starts (0: now).
	ResourceVersion int64
	// InitialEvents asks the backend for ADDED events of the current state
	// first, ended by one BOOKMARK.
	InitialEvents bool
	// WatchList is set when the client asked sendInitialEvents=true: the
	// end of the initial events is sent as a BOOKMARK annotated
	// k8s.io/initial-events-end.
	WatchList      bool
	AllowBookmarks bool
	Timeout        time.Duration
	// Convert rewrites an object to the request version (nil: as is).
	Convert func(ctx context.Context, obj []byte) ([]byte, error)
	// Transform renders an event's object as the client asked (Table,
	// PartialObjectMetadata; nil: as is). Bookmarks go through it too.
	Transform func(obj []byte) ([]byte, error)
	// Wire is the stream's encoding: JSON lines or protobuf frames.
	Wire httpx.OutputFormat
}

// NewPlan derives the backend request and rendering from validated
// options: resourceVersion ""/"0" starts with the current state (unless
// sendInitialEvents=false), N follows the changes after N.
func NewPlan(opts *metainternalversion.ListOptions, rv int64, minTimeout time.Duration) Plan {
	p := Plan{ResourceVersion: rv, AllowBookmarks: opts.AllowWatchBookmarks}
	legacy := opts.ResourceVersion == "" || opts.ResourceVersion == "0"
	switch {
	case opts.SendInitialEvents != nil:
		p.InitialEvents = *opts.SendInitialEvents
		p.WatchList = *opts.SendInitialEvents
	default:
		p.InitialEvents = legacy
	}
	if legacy {
		p.ResourceVersion = 0
	}
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		p.Timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	} else {
		p.Timeout = time.Duration(float64(minTimeout) * (1 + rand.Float64()))
	}
	return p
}

// Serve streams a backend watch to the client as Kubernetes watch
// events. The first message is empty so the HTTP headers (200,
// application/json) go out at once. It ends cleanly when the timeout
// passes, the client goes away or the backend closes the stream; a backend
// error becomes a final ERROR event carrying its Status (e.g. 410 Expired).
func Serve(ctx context.Context, out gatewayv1.KubeAPIService_WatchServer, p Plan, recv func() (Event, error)) error {
	contentType := p.Wire.WatchContentType()
	if err := out.Send(&httpbody.HttpBody{ContentType: contentType}); err != nil {
		return nil
	}
	// The backend is read ahead so that a frame is flushed only when no
	// other event is waiting (as kube-apiserver does): a burst goes out in
	// few writes.
	type received struct {
		ev  Event
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
	fw, buffered := out.(FrameWriter)
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
			if fw.WriteFrame(p.Wire.WatchErrorFrame(err)) == nil {
				_ = fw.Flush()
			}
			return
		}
		_ = out.Send(&httpbody.HttpBody{ContentType: contentType, Data: p.Wire.WatchErrorFrame(err)})
	}
	inInitial := p.InitialEvents
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
				if !p.WatchList {
					continue
				}
				frame, err = p.frame(httpx.EventBookmark, httpx.BookmarkObject(p.APIVersion, p.Kind, ev.GetResourceVersion(), true))
				break
			}
			if !p.AllowBookmarks {
				continue
			}
			frame, err = p.frame(httpx.EventBookmark, httpx.BookmarkObject(p.APIVersion, p.Kind, ev.GetResourceVersion(), false))
		case commonv1.EventType_EVENT_TYPE_ADDED, commonv1.EventType_EVENT_TYPE_MODIFIED, commonv1.EventType_EVENT_TYPE_DELETED:
			obj := ev.GetObject()
			if p.Convert != nil {
				if obj, err = p.Convert(ctx, obj); err != nil {
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

// FrameWriter is a watch stream that can hold frames back until a flush
// (the HTTP watch stream).
type FrameWriter interface {
	WriteFrame(frame []byte) error
	Flush() error
}

// frame renders one event, its object transformed as negotiated.
func (p *Plan) frame(eventType string, obj []byte) ([]byte, error) {
	if p.Transform != nil {
		var err error
		if obj, err = p.Transform(obj); err != nil {
			return nil, err
		}
	}
	return p.Wire.WatchFrame(eventType, obj)
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
func recoverRecv(recv func() (Event, error)) (ev Event, err error) {
	defer func() {
		if v := recover(); v != nil {
			metrics.RecordPanic("gateway", v, "in", "watch")
			ev, err = nil, apierrors.NewInternalError(errors.New(httpx.PanicMessage)) //nolint:staticcheck // kube-apiserver's wording, period included
		}
	}()
	return recv()
}
