// Package httpx is the gateway's HTTP layer, everything that knows HTTP
// rather than Kubernetes resources:
//
//   - the edge in front of the grpc-gateway mux (Edge: bearer tokens,
//     request deadline, body limit, ?watch=true rewrite, in-flight and
//     watch limits, panic recovery);
//   - request metadata: the headers that reach KubeAPIService as gRPC
//     metadata (RequestMeta) and the response metadata it answers with
//     (SetHTTPCode, AddWarnings);
//   - response encoding in one place: content negotiation
//     (NegotiateOutput, OutputFormat), rendering (WriteOutput, RenderList,
//     WatchFrame) and the grpc-gateway marshaler that passes bodies
//     through (RawMarshaler);
//   - errors: Kubernetes Status bodies (WriteStatus, ErrorHandler), the
//     "404 page not found" of a path no handler serves (ErrNotFound,
//     marked with kstatus.NewPageNotFound), 422s built from field errors
//     (NewInvalid).
package httpx
