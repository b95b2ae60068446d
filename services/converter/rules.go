package converter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/crdplane/crdplane/pkg/celconv"
)

// RuleCache holds the compiled conversion rules (package celconv) of each
// CRD, compiled once per CRD uid and resourceVersion (the rules live in an
// annotation, which changes the resourceVersion, not the generation).
type RuleCache struct {
	mu    sync.Mutex
	rules map[string]cachedRules // by CRD uid
}

type cachedRules struct {
	resourceVersion string
	rules           *celconv.Rules
	err             error
}

// NewRuleCache returns an empty cache.
func NewRuleCache() *RuleCache {
	return &RuleCache{rules: map[string]cachedRules{}}
}

// Get returns the compiled rules of crd (nil when it has none).
func (c *RuleCache) Get(crd *apiextensionsv1.CustomResourceDefinition) (*celconv.Rules, error) {
	if c == nil {
		return compileRules(crd)
	}
	uid := string(crd.UID)
	c.mu.Lock()
	e, ok := c.rules[uid]
	c.mu.Unlock()
	if ok && e.resourceVersion == crd.ResourceVersion && uid != "" {
		return e.rules, e.err
	}
	r, err := compileRules(crd)
	if uid != "" {
		c.mu.Lock()
		c.rules[uid] = cachedRules{resourceVersion: crd.ResourceVersion, rules: r, err: err}
		c.mu.Unlock()
	}
	return r, err
}

// Forget drops the rules of a deleted CRD.
func (c *RuleCache) Forget(uid string) {
	c.mu.Lock()
	delete(c.rules, uid)
	c.mu.Unlock()
}

func compileRules(crd *apiextensionsv1.CustomResourceDefinition) (*celconv.Rules, error) {
	r, errs := celconv.Compile(crd)
	if len(errs) > 0 {
		// The validator refuses such rules on write; a CRD stored before
		// cannot convert with them.
		return nil, conversionFailed(fmt.Sprintf("conversion rules of %s do not compile: %v", crd.Name, errs.ToAggregate()))
	}
	return r, nil
}

// convertWithRules converts objects with the CRD's CEL rules, in process.
// Any failure fails the whole conversion (a plain 500, as a webhook's).
func convertWithRules(ctx context.Context, rules *celconv.Rules, desiredAPIVersion string, objects [][]byte) ([][]byte, error) {
	out := make([][]byte, len(objects))
	for i, raw := range objects {
		var obj map[string]any
		if err := utiljson.Unmarshal(raw, &obj); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("object %d: %v", i, err))
		}
		from, _ := obj["apiVersion"].(string)
		if from == desiredAPIVersion {
			out[i] = raw
			continue
		}
		conv, err := rules.Convert(ctx, obj, desiredAPIVersion)
		if err != nil {
			return nil, conversionFailed(fmt.Sprintf("conversion rules for %s failed: %v", rules.GroupVersionKind(from), err))
		}
		if out[i], err = json.Marshal(conv); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	return out, nil
}

// conversionFailed is a plain 500 Status without a reason, the form of
// upstream's conversion failures.
func conversionFailed(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: msg}}
}
