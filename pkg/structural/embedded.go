package structural

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/objmeta/metavalidation"
)

// ValidateEmbeddedResources validates the TypeMeta and ObjectMeta of the
// x-kubernetes-embedded-resource objects in x (not the root's), as
// upstream: apiVersion and kind are required, apiVersion must parse as a
// group/version, kind must be a DNS-1035 label in any case, and metadata
// passes ObjectMeta validation with path-segment names (a missing name is
// allowed).
func ValidateEmbeddedResources(fldPath *field.Path, x any, s *Schema) field.ErrorList {
	if s == nil || !s.embeddedBelow {
		return nil
	}
	return embedded(context.Background(), fldPath, x, s)
}

func embedded(ctx context.Context, pth *field.Path, x any, s *Schema) field.ErrorList {
	if s == nil || !s.embeddedBelow {
		return nil
	}
	var errs field.ErrorList
	switch x := x.(type) {
	case map[string]any:
		if s.embeddedResource {
			errs = append(errs, embeddedResource(ctx, pth, x)...)
		}
		for _, k := range s.propertyNames {
			if v, ok := x[k]; ok {
				errs = append(errs, embedded(ctx, pth.Child(k), v, s.properties[k])...)
			}
		}
		if ap := s.additionalProperties; ap.hasEmbedded() {
			for _, k := range sortedKeys(x) {
				if _, isProp := s.properties[k]; !isProp {
					errs = append(errs, embedded(ctx, pth.Key(k), x[k], ap)...)
				}
			}
		}
	case []any:
		if s.items.hasEmbedded() {
			for i, v := range x {
				errs = append(errs, embedded(ctx, pth.Index(i), v, s.items)...)
			}
		}
	}
	return errs
}

func embeddedResource(ctx context.Context, pth *field.Path, x map[string]any) field.ErrorList {
	var errs field.ErrorList
	// As upstream v1.33 (objectmeta/validation.go validateEmbeddedResource);
	// later versions drop the detail.
	if _, found := x["apiVersion"]; !found {
		errs = append(errs, field.Required(pth.Child("apiVersion"), "must not be empty"))
	}
	if _, found := x["kind"]; !found {
		errs = append(errs, field.Required(pth.Child("kind"), "must not be empty"))
	}
	if v, found := x["apiVersion"]; found {
		if apiVersion, ok := v.(string); !ok {
			errs = append(errs, field.Invalid(pth.Child("apiVersion"), v, "must be a string"))
		} else if apiVersion == "" {
			errs = append(errs, field.Invalid(pth.Child("apiVersion"), apiVersion, "must not be empty"))
		} else if _, err := schema.ParseGroupVersion(apiVersion); err != nil {
			errs = append(errs, field.Invalid(pth.Child("apiVersion"), apiVersion, err.Error()))
		}
	}
	if v, found := x["kind"]; found {
		if kind, ok := v.(string); !ok {
			errs = append(errs, field.Invalid(pth.Child("kind"), v, "must be a string"))
		} else if kind == "" {
			errs = append(errs, field.Invalid(pth.Child("kind"), kind, "must not be empty"))
		} else if msgs := metavalidation.IsDNS1035Label(strings.ToLower(kind)); len(msgs) > 0 {
			errs = append(errs, field.Invalid(pth.Child("kind"), kind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
		}
	}
	if v, found := x["metadata"]; found {
		meta, _, _, _, err := getObjectMeta(x, false, "")
		if err != nil {
			errs = append(errs, field.Invalid(pth.Child("metadata"), v, err.Error()))
		} else {
			if meta.Name == "" {
				meta.Name = "fakename" // a name is not required here
			}
			errs = append(errs, metavalidation.ValidateObjectMetaAccessor(meta, meta.Namespace != "",
				metavalidation.ValidatePathSegmentName, pth.Child("metadata"))...)
		}
	}
	return errs
}
