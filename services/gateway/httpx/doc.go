// Package httpx is the gateway's HTTP layer, everything that knows HTTP
// rather than Kubernetes resources:
//
//   - the edge in front of the grpc-gateway mux (Edge: bearer tokens,
//     request deadline, body limit, ?watch=true rewrite, in-flight and
//     watch limits, panic recovery);
//   - request metadata: the headers that reach KubeAPIService as gRPC
//     metadata (RequestMeta) and the response metadata it answers with
//     (SetHTTPCode, AddWarnings);
//   - response encoding in one place: content negotiation per kind of
//     endpoint (NegotiateOutput, NegotiateWatch, OutputFormat, over
//     pkg/kubewire), rendering in JSON, YAML or Kubernetes protobuf
//     (Render, RenderTypedList, WatchFrame; the process's protobuf
//     Encoder is Wire), gzip of large responses as kube-apiserver's
//     (gzip.go) and the grpc-gateway marshaler that passes bodies through
//     (RawMarshaler);
//   - request bodies: JSON, YAML and protobuf (DecodeRequestBody,
//     DecodeDeleteBody);
//   - errors: Kubernetes Status bodies encoded as upstream's
//     ErrorNegotiated (WriteStatusFor, ErrorBody, ErrorHandler), the
//     "404 page not found" of a path no handler serves (ErrNotFound,
//     marked with kstatus.NewPageNotFound), 422s built from field errors
//     (NewInvalid).
package httpx
