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
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
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
	if err := out.Send(&httpbody.HttpBody{ContentType: contentTypeJSON}); err != nil {
		return nil
	}
	inInitial := p.initialEvents
	for {
		ev, err := recv()
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil || isStreamEnd(err) {
				return nil
			}
			_ = out.Send(&httpbody.HttpBody{ContentType: contentTypeJSON, Data: watchErrorFrame(err)})
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
				frame = watchFrame(eventBookmark, bookmarkObject(p.apiVersion, p.kind, ev.GetResourceVersion(), true))
				break
			}
			if !p.allowBookmarks {
				continue
			}
			frame = watchFrame(eventBookmark, bookmarkObject(p.apiVersion, p.kind, ev.GetResourceVersion(), false))
		case commonv1.EventType_EVENT_TYPE_ADDED, commonv1.EventType_EVENT_TYPE_MODIFIED, commonv1.EventType_EVENT_TYPE_DELETED:
			obj := ev.GetObject()
			if p.convert != nil {
				if obj, err = p.convert(ctx, obj); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					_ = out.Send(&httpbody.HttpBody{ContentType: contentTypeJSON, Data: watchErrorFrame(err)})
					return nil
				}
			}
			frame = watchFrame(eventTypeName(ev.GetType()), obj)
		default:
			continue
		}
		if err := out.Send(&httpbody.HttpBody{ContentType: contentTypeJSON, Data: frame}); err != nil {
			return nil
		}
	}
}

func eventTypeName(t commonv1.EventType) string {
	switch t {
	case commonv1.EventType_EVENT_TYPE_ADDED:
		return eventAdded
	case commonv1.EventType_EVENT_TYPE_MODIFIED:
		return eventModified
	case commonv1.EventType_EVENT_TYPE_DELETED:
		return eventDeleted
	case commonv1.EventType_EVENT_TYPE_BOOKMARK:
		return eventBookmark
	}
	return eventError
}

// isStreamEnd reports errors that only mean the watch context ended.
func isStreamEnd(err error) bool {
	switch status.Code(err) {
	case codes.Canceled, codes.DeadlineExceeded:
		return true
	}
	return false
}
