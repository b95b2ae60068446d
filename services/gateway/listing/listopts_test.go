package listing

import (
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// TestResourceVersionParameter: a resourceVersion that is not a uint64 is
// what upstream answers for each verb: a get or a watch a plain 500 (no
// reason) with its versioner's error, a list upstream's 400 "invalid
// resource version: ...".
func TestResourceVersionParameter(t *testing.T) {
	const abc = `resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax`
	for _, tc := range []struct {
		rv      string
		want    int64
		getCode int32
		getMsg  string
		listMsg string
	}{
		{rv: "", want: 0},
		{rv: "0", want: 0},
		{rv: "42", want: 42},
		{rv: "abc", getCode: 500, getMsg: abc, listMsg: "invalid resource version: " + abc},
		{rv: "-1", getCode: 500,
			getMsg:  `resourceVersion: Invalid value: "-1": strconv.ParseUint: parsing "-1": invalid syntax`,
			listMsg: `invalid resource version: resourceVersion: Invalid value: "-1": strconv.ParseUint: parsing "-1": invalid syntax`},
		{rv: "99999999999999999999", getCode: 500,
			getMsg:  `resourceVersion: Invalid value: "99999999999999999999": strconv.ParseUint: parsing "99999999999999999999": value out of range`,
			listMsg: `invalid resource version: resourceVersion: Invalid value: "99999999999999999999": strconv.ParseUint: parsing "99999999999999999999": value out of range`},
	} {
		t.Run(tc.rv, func(t *testing.T) {
			got, err := ParseRV(tc.rv)
			if tc.getCode == 0 {
				if err != nil || got != tc.want {
					t.Fatalf("parseRV = %d, %v; want %d", got, err, tc.want)
				}
			} else {
				s := kstatus.FromError(err)
				if s == nil || s.Code != tc.getCode || s.Reason != "" || s.Message != tc.getMsg || s.Details != nil {
					t.Fatalf("parseRV error = %+v; want a plain %d %q", s, tc.getCode, tc.getMsg)
				}
			}
			_, _, err = StorageOptions(&metainternalversion.ListOptions{ResourceVersion: tc.rv}, nil)
			if tc.listMsg == "" {
				if err != nil {
					t.Fatalf("StorageOptions: %v", err)
				}
				return
			}
			if !apierrors.IsBadRequest(err) || err.Error() != tc.listMsg {
				t.Fatalf("StorageOptions error = %v; want 400 %q", err, tc.listMsg)
			}
		})
	}
}

// TestStorageListOptionsLimit: resourceVersion=0 is served from upstream's
// watch cache, which ignores the limit (the whole list, no continue);
// every other read keeps it.
func TestStorageListOptionsLimit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      metainternalversion.ListOptions
		wantLimit int64
		wantRV    int64 // exact read
		wantMin   int64 // not older than
	}{
		{name: "rv 0 with a limit", opts: metainternalversion.ListOptions{ResourceVersion: "0", Limit: 2}, wantLimit: 0},
		{name: "rv 0 NotOlderThan with a limit", opts: metainternalversion.ListOptions{ResourceVersion: "0", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, Limit: 2}, wantLimit: 0},
		{name: "rv 0 with a continue", opts: metainternalversion.ListOptions{ResourceVersion: "0", Limit: 2, Continue: "token"}, wantLimit: 2},
		{name: "no rv with a limit", opts: metainternalversion.ListOptions{Limit: 2}, wantLimit: 2},
		{name: "rv with a limit (exact)", opts: metainternalversion.ListOptions{ResourceVersion: "7", Limit: 2}, wantLimit: 2, wantRV: 7},
		{name: "rv NotOlderThan with a limit", opts: metainternalversion.ListOptions{ResourceVersion: "7", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, Limit: 2}, wantLimit: 2, wantMin: 7},
		{name: "rv without a limit", opts: metainternalversion.ListOptions{ResourceVersion: "7"}, wantMin: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lo, minRV, err := StorageOptions(&tc.opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			if lo.GetLimit() != tc.wantLimit || lo.GetResourceVersion() != tc.wantRV || minRV != tc.wantMin {
				t.Fatalf("limit %d, rv %d, minRV %d; want %d, %d, %d", lo.GetLimit(), lo.GetResourceVersion(), minRV, tc.wantLimit, tc.wantRV, tc.wantMin)
			}
		})
	}
}

// TestWatchListGateOff: upstream v1.33 has WatchList off: sendInitialEvents
// on a watch is a 422, true or false; on a list it is forbidden anyway.
func TestWatchListGateOff(t *testing.T) {
	yes, no := true, false
	const forbidden = "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
	for _, tc := range []struct {
		name string
		p    Params
		want string // "" valid
	}{
		{name: "watch", p: Params{Watch: true}},
		{name: "watch rv 0", p: Params{Watch: true, ResourceVersion: "0"}},
		{name: "sendInitialEvents=true", p: Params{Watch: true, SendInitialEvents: &yes, ResourceVersionMatch: "NotOlderThan"},
			want: `ListOptions.meta.k8s.io "" is invalid: ` + forbidden},
		{name: "sendInitialEvents=false", p: Params{Watch: true, SendInitialEvents: &no, ResourceVersionMatch: "NotOlderThan", ResourceVersion: "5"},
			want: `ListOptions.meta.k8s.io "" is invalid: ` + forbidden},
		{name: "list", p: Params{SendInitialEvents: &yes},
			want: `ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := ParseOptions(tc.p)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if opts.SendInitialEvents != nil || opts.ResourceVersionMatch != "" {
					t.Fatalf("no WatchList defaults expected: %+v", opts)
				}
				return
			}
			if !apierrors.IsInvalid(err) || err.Error() != tc.want {
				t.Fatalf("got %v; want 422 %q", err, tc.want)
			}
		})
	}
}

// TestSelectName: a single-object watch path selects its name, as
// upstream's ListResource does: a field selector given too must require
// exactly that name.
func TestSelectName(t *testing.T) {
	for _, tc := range []struct {
		name, selector, Object string
		want                   string // the resulting selector
		bad                    bool
	}{
		{name: "collection", selector: "", Object: "", want: ""},
		{name: "collection with a selector", selector: "spec.color=red", Object: "", want: "spec.color=red"},
		{name: "object", selector: "", Object: "a", want: "metadata.name=a"},
		{name: "object and its name", selector: "metadata.name=a", Object: "a", want: "metadata.name=a"},
		{name: "object, its name and more", selector: "metadata.name=a,spec.color=red", Object: "a", want: "metadata.name=a,spec.color=red"},
		{name: "another name", selector: "metadata.name=b", Object: "a", bad: true},
		{name: "no name", selector: "spec.color=red", Object: "a", bad: true},
		{name: "not this name", selector: "metadata.name!=a", Object: "a", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := &metainternalversion.ListOptions{}
			if tc.selector != "" {
				sel, err := fields.ParseSelector(tc.selector)
				if err != nil {
					t.Fatal(err)
				}
				opts.FieldSelector = sel
			}
			err := SelectName(opts, tc.Object)
			if tc.bad {
				if !apierrors.IsBadRequest(err) || err.Error() != "fieldSelector metadata.name doesn't match requested name" {
					t.Fatalf("got %v; want upstream's 400", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if opts.FieldSelector != nil {
				got = opts.FieldSelector.String()
			}
			if got != tc.want {
				t.Fatalf("selector %q; want %q", got, tc.want)
			}
		})
	}
}

// TestRetryAfterHeader: an error Status with a retry period carries
// Retry-After, as upstream's ErrorNegotiated sets it (a 504 "Too large
// resource version", a 429); others do not.
func TestRetryAfterHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{name: "too large resource version", err: ErrTooLargeRV("99999999", 12, 1), want: "1"},
		{name: "too large, no hint", err: ErrTooLargeRV("18446744073709551615", 12, 0), want: ""},
		{name: "too many requests", err: apierrors.NewTooManyRequests("slow down", 3), want: "3"},
		{name: "not found", err: apierrors.NewNotFound(schema.GroupResource{Group: "stable.example.com", Resource: "crontabs"}, "a"), want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			httpx.WriteStatus(w, kstatus.FromError(tc.err))
			if got := w.Header().Get("Retry-After"); got != tc.want {
				t.Fatalf("Retry-After %q; want %q", got, tc.want)
			}
			if w.Code == http.StatusOK {
				t.Fatalf("code %d", w.Code)
			}
		})
	}
}
