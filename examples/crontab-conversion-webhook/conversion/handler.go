package conversion

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// maxBody bounds a ConversionReview request (a large list's worth).
const maxBody = 256 << 20

// Handler serves ConversionReviews (apiextensions.k8s.io/v1 and v1beta1,
// answered in the version received) with Convert. It counts what it
// serves. The zero value is ready to use.
type Handler struct {
	// Observe, when set, is called after every review with the time spent
	// converting it and its number of objects (benchmarks use it).
	Observe func(d time.Duration, objects int)

	reviews  atomic.Int64
	objects  atomic.Int64
	failures atomic.Int64
}

// Reviews is the number of ConversionReviews served.
func (h *Handler) Reviews() int64 { return h.reviews.Load() }

// Objects is the number of objects converted.
func (h *Handler) Objects() int64 { return h.objects.Load() }

// Failures is the number of reviews answered with result.status Failed.
func (h *Handler) Failures() int64 { return h.failures.Load() }

// review is a ConversionReview of either version (the same shape).
type review struct {
	metav1.TypeMeta `json:",inline"`
	Request         *apiextensionsv1.ConversionRequest  `json:"request,omitempty"`
	Response        *apiextensionsv1.ConversionResponse `json:"response,omitempty"`
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed: POST a ConversionReview", http.StatusMethodNotAllowed)
		return
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		http.Error(w, fmt.Sprintf("unsupported content type %q: want application/json", r.Header.Get("Content-Type")), http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	start := time.Now()
	var in review
	if err := json.Unmarshal(body, &in); err != nil {
		http.Error(w, "decoding the ConversionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	switch in.APIVersion {
	case "apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1":
	default:
		http.Error(w, fmt.Sprintf("unsupported ConversionReview version %q", in.APIVersion), http.StatusBadRequest)
		return
	}
	if in.Kind != "ConversionReview" || in.Request == nil {
		http.Error(w, "not a ConversionReview request", http.StatusBadRequest)
		return
	}
	out := review{
		TypeMeta: in.TypeMeta,
		Response: h.convert(in.Request),
	}
	h.reviews.Add(1)
	h.objects.Add(int64(len(in.Request.Objects)))
	if out.Response.Result.Status != metav1.StatusSuccess {
		h.failures.Add(1)
	}
	data, err := json.Marshal(&out)
	if err != nil {
		http.Error(w, "encoding the ConversionReview: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if h.Observe != nil {
		h.Observe(time.Since(start), len(in.Request.Objects))
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

// convert converts every object of req; the first failure fails the review
// (the API server then fails the request that caused it).
func (h *Handler) convert(req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID, ConvertedObjects: make([]runtime.RawExtension, len(req.Objects))}
	for i, obj := range req.Objects {
		c, err := ConvertJSON(obj.Raw, req.DesiredAPIVersion)
		if err != nil {
			return &apiextensionsv1.ConversionResponse{UID: req.UID, Result: metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}}
		}
		resp.ConvertedObjects[i] = runtime.RawExtension{Raw: c}
	}
	resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	return resp
}

// WriteMetrics writes the counters in the Prometheus text format.
func (h *Handler) WriteMetrics(w io.Writer) {
	fmt.Fprintf(w, "# HELP conversion_reviews_total ConversionReviews served.\n# TYPE conversion_reviews_total counter\nconversion_reviews_total %d\n", h.Reviews())
	fmt.Fprintf(w, "# HELP conversion_objects_total Objects converted.\n# TYPE conversion_objects_total counter\nconversion_objects_total %d\n", h.Objects())
	fmt.Fprintf(w, "# HELP conversion_review_failures_total ConversionReviews answered with result.status Failed.\n# TYPE conversion_review_failures_total counter\nconversion_review_failures_total %d\n", h.Failures())
}

// Mux serves the handler at path, with /healthz and /metrics.
func (h *Handler) Mux(path string) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(path, h)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		h.WriteMetrics(w)
	})
	return mux
}
