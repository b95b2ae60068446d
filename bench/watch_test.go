package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// follow watches the collection at url (with ?watch=true and its own
// parameters, without resourceVersion) from resourceVersion rv in the
// background, and calls added with every ADDED event's object (the fields
// the benchmarks look at) until ctx ends. When the server ends the watch (as it ends one that falls too
// far behind, like upstream), it resumes from the last event it saw. It
// returns once the first watch is open.
func follow(tb testing.TB, ctx context.Context, client *http.Client, token, url, rv string, added func(obj *watchedObject)) {
	tb.Helper()
	watchFrom := func(rv string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"&resourceVersion="+rv, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("watch: HTTP %d", resp.StatusCode)
		}
		return resp, nil
	}
	resp, err := watchFrom(rv)
	if err != nil {
		tb.Fatal(err)
	}
	go func() {
		last := rv
		for {
			dec := json.NewDecoder(resp.Body)
			for {
				var ev struct {
					Type   string        `json:"type"`
					Object watchedObject `json:"object"`
				}
				if err := dec.Decode(&ev); err != nil {
					break
				}
				if ev.Type == "ADDED" {
					last = ev.Object.Metadata.ResourceVersion
					added(&ev.Object)
				}
			}
			resp.Body.Close()
			if ctx.Err() != nil {
				return
			}
			if resp, err = watchFrom(last); err != nil {
				return
			}
		}
	}()
}

// watchedObject is what follow decodes of an event's object.
type watchedObject struct {
	APIVersion string `json:"apiVersion"`
	Host       string `json:"host"`
	Metadata   struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
}
