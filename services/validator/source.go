package validator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/crdplane/crdplane/pkg/crdcache"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
)

// CRD is a CustomResourceDefinition.
type CRD = apiextensionsv1.CustomResourceDefinition

// Source supplies the CRDs the validator admits objects of.
type Source interface {
	// Get returns the CRD ref names, at ref's uid and at least ref's
	// generation (an empty uid or zero generation matches any). Errors are
	// Kubernetes Status errors (apierrors): NotFound for an unknown CRD,
	// ServiceUnavailable when the CRD generation does not arrive in time.
	Get(ctx context.Context, ref *commonv1.CRDRef) (*CRD, error)
	// OnChange registers fn to run on every CRD change (old is nil on add,
	// new is nil on delete).
	OnChange(fn func(old, new *CRD))
	// Ready reports whether the source can serve CRDs.
	Ready() error
}

var crdResource = schema.GroupResource{Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions"}

// cacheSource serves CRDs from a crdcache fed by the registry's watch.
type cacheSource struct {
	cache   *crdcache.Cache
	timeout time.Duration
}

// NewCacheSource returns a Source backed by cache (which the caller runs).
// Get waits up to timeout for the CRD generation it is asked for.
func NewCacheSource(cache *crdcache.Cache, timeout time.Duration) Source {
	return &cacheSource{cache: cache, timeout: timeout}
}

func (s *cacheSource) Get(ctx context.Context, ref *commonv1.CRDRef) (*CRD, error) {
	name, uid, gen := ref.GetName(), ref.GetUid(), ref.GetGeneration()
	if crd, ok := s.cache.Get(name); ok && matches(crd, uid, gen) {
		return crd, nil
	}
	wctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	crd, err := s.cache.WaitFor(wctx, name, uid, gen)
	if err == nil {
		return crd, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if _, known := s.cache.Get(name); !known && s.cache.Synced() {
		return nil, apierrors.NewNotFound(crdResource, name)
	}
	return nil, apierrors.NewServiceUnavailable(fmt.Sprintf(
		"the validator has not seen CustomResourceDefinition %s (uid %s, generation %d) within %s; retry", name, uid, gen, s.timeout))
}

func matches(crd *CRD, uid string, gen int64) bool {
	return (uid == "" || string(crd.UID) == uid) && crd.Generation >= gen
}

func (s *cacheSource) OnChange(fn func(old, new *CRD)) { s.cache.OnChange(fn) }

func (s *cacheSource) Ready() error {
	if !s.cache.Synced() {
		return errors.New("CRD cache not synced with the registry yet")
	}
	return nil
}

// dirSource serves CRDs read once from manifest files, so the validator
// can run alone (load tests): no registry, no etcd. Requests match CRDs by
// name; their uid and generation are ignored.
type dirSource struct {
	byName map[string]*CRD
}

// NewDirSource reads every CustomResourceDefinition in the YAML and JSON
// files (multi-document YAML allowed) below dir. A CRD without uid gets
// "crddir-<name>", one without generation gets 1; without accepted names,
// its spec names are used.
func NewDirSource(dir string, log *slog.Logger) (Source, error) {
	if log == nil {
		log = slog.Default()
	}
	src := &dirSource{byName: map[string]*CRD{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		if d.IsDir() {
			return nil
		}
		crds, err := readCRDs(path)
		if err != nil {
			return err
		}
		for _, crd := range crds {
			if prev, dup := src.byName[crd.Name]; dup && prev != nil {
				return fmt.Errorf("%s: CustomResourceDefinition %s defined twice", path, crd.Name)
			}
			src.byName[crd.Name] = crd
			log.Info("loaded CRD", "name", crd.Name, "file", path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read CRDs from %s: %w", dir, err)
	}
	return src, nil
}

func readCRDs(path string) ([]*CRD, error) {
	f, err := os.Open(path) //nolint:gosec // G703: path is a file found by walking the operator's own --crd-dir
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*CRD
	for i := 0; ; i++ {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if raw == nil || raw["kind"] != "CustomResourceDefinition" {
			continue
		}
		b, err := utiljson.Marshal(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		crd := &CRD{}
		if err := utiljson.Unmarshal(b, crd); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if crd.Name == "" {
			return nil, fmt.Errorf("%s: document %d: CustomResourceDefinition without a name", path, i)
		}
		if crd.UID == "" {
			crd.UID = types.UID("crddir-" + crd.Name)
		}
		if crd.Generation == 0 {
			crd.Generation = 1
		}
		if crd.Status.AcceptedNames.Kind == "" {
			crd.Status.AcceptedNames = crd.Spec.Names
		}
		out = append(out, crd)
	}
}

func (s *dirSource) Get(_ context.Context, ref *commonv1.CRDRef) (*CRD, error) {
	crd, ok := s.byName[ref.GetName()]
	if !ok {
		return nil, apierrors.NewNotFound(crdResource, ref.GetName())
	}
	return crd, nil
}

func (s *dirSource) OnChange(func(old, new *CRD)) {}

func (s *dirSource) Ready() error { return nil }

// list returns the CRDs (for compiling them up front).
func (s *dirSource) list() []*CRD {
	out := make([]*CRD, 0, len(s.byName))
	for _, crd := range s.byName {
		out = append(out, crd)
	}
	return out
}
