// Command crdplane-probe is the health check of the crdplane images (built
// FROM scratch, they have no shell or curl): it GETs each URL and exits 0
// when every one answers 2xx within --timeout.
//
//	crdplane-probe http://127.0.0.1:7101/readyz
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	timeout := flag.Duration("timeout", 2*time.Second, "bound on each request")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: crdplane-probe [--timeout 2s] URL...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, url := range flag.Args() {
		if err := probe(url, *timeout); err != nil {
			fmt.Fprintln(os.Stderr, "crdplane-probe:", err)
			os.Exit(1)
		}
	}
}

func probe(url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	return nil
}
