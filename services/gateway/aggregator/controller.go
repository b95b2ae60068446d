package aggregator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/transport"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"

	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

// The availability controller is kube-aggregator's remote
// AvailableConditionController without Services and Endpoints (crdplane
// serves neither: the checks ServiceNotFound, ServicePortError,
// EndpointsNotFound and MissingEndpoints have nothing to look at). It
// GETs /apis/<group>/<version> of each APIService's backend, five
// attempts in parallel, as system:kube-aggregator in system:masters,
// without verifying the backend's certificate (as upstream: "if someone
// owns the network and messes with your status that's not so bad"), and
// writes Available: True "Passed" "all checks passed", or False
// "FailedDiscoveryCheck" with the last attempt's error. Every replica of
// the gateway runs it, as every kube-apiserver runs upstream's; a write
// happens only when the status changes.

// runController checks every APIService once per ProbeInterval, one when
// it changes, and a failed one again sooner (backoff from 1s, doubling, up
// to ProbeInterval), as upstream's rate-limited requeue.
func (a *Aggregator) runController(ctx context.Context) {
	type entry struct {
		next    time.Time
		backoff time.Duration
	}
	due := map[string]*entry{}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case name := <-a.kick:
			due[name] = &entry{next: time.Now()}
		case <-tick.C:
		}
		now := time.Now()
		for name, e := range due {
			if now.Before(e.next) {
				continue
			}
			s := a.get(name)
			if s == nil {
				delete(due, name)
				continue
			}
			err := a.sync(ctx, s)
			switch {
			case err != nil:
				if e.backoff == 0 {
					e.backoff = time.Second
				} else if e.backoff *= 2; e.backoff > a.cfg.ProbeInterval {
					e.backoff = a.cfg.ProbeInterval
				}
				e.next = time.Now().Add(e.backoff)
				a.log.Debug("APIService check failed", "apiservice", name, "err", err, "retry", e.backoff)
			default:
				e.backoff = 0
				e.next = time.Now().Add(a.cfg.ProbeInterval)
			}
		}
		// an APIService not yet scheduled (listed before the controller
		// ran, or missed kick) is checked now
		a.mu.Lock()
		for name := range a.services {
			if _, ok := due[name]; !ok {
				due[name] = &entry{next: now}
			}
		}
		a.mu.Unlock()
	}
}

// sync checks one APIService and writes its Available condition when it
// changed; the error is the failed check's (to retry sooner).
func (a *Aggregator) sync(ctx context.Context, orig *apiregistrationv1.APIService) error {
	if orig.Spec.Service == nil {
		// local: Available from its creation (the registry's strategy)
		return nil
	}
	s := orig.DeepCopy()
	cond := apiregistrationv1.APIServiceCondition{
		Type:               apiregistrationv1.Available,
		Status:             apiregistrationv1.ConditionTrue,
		LastTransitionTime: metav1.Now(),
	}
	checkErr := a.discoveryCheck(ctx, s)
	if checkErr != nil {
		cond.Status = apiregistrationv1.ConditionFalse
		cond.Reason = "FailedDiscoveryCheck"
		cond.Message = checkErr.Error()
	} else {
		cond.Reason = "Passed"
		cond.Message = "all checks passed"
		a.refreshDiscovery(ctx, s)
		a.refreshOpenAPI(ctx, s)
		a.refreshOpenAPIv2(s)
	}
	apiregistrationv1helper.SetAPIServiceCondition(s, cond)
	if err := a.updateStatus(ctx, orig, s); err != nil {
		return err
	}
	return checkErr
}

// updateStatus writes the status when it changed, as upstream's
// updateAPIServiceStatus.
func (a *Aggregator) updateStatus(ctx context.Context, orig, s *apiregistrationv1.APIService) error {
	if apiequality.Semantic.DeepEqual(orig.Status, s.Status) {
		return nil
	}
	body, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode APIService %s: %w", s.Name, err)
	}
	_, err = a.cfg.Client.Update(ctx, &registryv1.RBACServiceUpdateRequest{
		Target: &registryv1.RBACTarget{Resource: "apiservices"},
		Request: &registryv1.UpdateRequest{Name: s.Name, Subresource: "status", Object: body,
			Options: &registryv1.WriteOptions{FieldManager: "kube-apiserver"}},
	})
	if err != nil {
		return fmt.Errorf("update status of APIService %s: %w", s.Name, err)
	}
	old := apiregistrationv1helper.GetAPIServiceConditionByType(orig, apiregistrationv1.Available)
	now := apiregistrationv1helper.GetAPIServiceConditionByType(s, apiregistrationv1.Available)
	if old == nil || old.Status != now.Status {
		a.log.Info("changing APIService availability", "name", s.Name, "status", now.Status, "reason", now.Reason, "message", now.Message)
	}
	return nil
}

// probeAttempts is upstream's number of parallel discovery attempts.
const probeAttempts = 5

// discoveryCheck is upstream's: a GET of /apis/<group>/<version> (or
// /api/<version> for the legacy v1.) must answer 2xx or 3xx in one of five
// attempts.
func (a *Aggregator) discoveryCheck(ctx context.Context, s *apiregistrationv1.APIService) error {
	cert, key := a.proxyCertKey()
	rt, err := transport.New(&transport.Config{DialHolder: a.dial, TLS: transport.TLSConfig{
		Insecure: true,
		CertData: cert,
		KeyData:  key,
	}})
	if err != nil {
		return err
	}
	client := &http.Client{
		Transport: rt,
		Timeout:   5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	defer client.CloseIdleConnections()
	u := a.discoveryURL(s)
	results := make(chan error, probeAttempts)
	for range probeAttempts {
		go func() {
			errCh := make(chan error, 1)
			go func() {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
				if err != nil {
					errCh <- err
					return
				}
				transport.SetAuthProxyHeaders(req, "system:kube-aggregator", "", []string{"system:masters"}, nil)
				resp, err := client.Do(req)
				if resp != nil {
					_ = resp.Body.Close()
					if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusMultipleChoices {
						errCh <- fmt.Errorf("bad status from %v: %d", u, resp.StatusCode)
						return
					}
				}
				errCh <- err
			}()
			select {
			case err := <-errCh:
				if err != nil {
					results <- fmt.Errorf("failing or missing response from %v: %w", u, err)
					return
				}
			case <-time.After(6 * time.Second):
				results <- fmt.Errorf("timed out waiting for %v", u)
				return
			}
			results <- nil
		}()
	}
	var last error
	for range probeAttempts {
		if last = <-results; last == nil {
			break
		}
	}
	return last
}

// discoveryURL is the URL the check GETs.
func (a *Aggregator) discoveryURL(s *apiregistrationv1.APIService) *url.URL {
	u := &url.URL{Scheme: "https", Host: a.cfg.Resolver.Resolve(serviceRef(s))}
	if s.Name == "v1." {
		u.Path = "/api/" + s.Spec.Version
	} else {
		u.Path = "/apis/" + s.Spec.Group + "/" + s.Spec.Version
	}
	return u
}
