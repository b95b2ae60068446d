package registry

import (
	"context"
	"errors"
	"io"

	"github.com/crdplane/crdplane/pkg/kstatus"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// watchStream is the server side of a registry watch (CRDs, Namespaces,
// the RBAC kinds): every one sends WatchResponses.
type watchStream interface {
	Context() context.Context
	Send(*registryv1.WatchResponse) error
}

// relayWatch opens the storage watch req and relays its events to stream
// until either ends: a storage error as a Kubernetes Status, none when the
// client went away or the storage watch closed.
func relayWatch(client storagev1.StorageServiceClient, req *storagev1.WatchRequest, stream watchStream) error {
	ws, err := client.Watch(stream.Context(), req)
	if err != nil {
		return kstatus.ToGRPC(err)
	}
	for {
		ev, err := ws.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if stream.Context().Err() != nil {
				return nil
			}
			return kstatus.ToGRPC(err)
		}
		if err := stream.Send(&registryv1.WatchResponse{Type: ev.GetType(), Object: ev.GetObject(), ResourceVersion: ev.GetResourceVersion()}); err != nil {
			return err
		}
	}
}
