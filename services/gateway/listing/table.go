package listing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"time"

	"github.com/crdplane/crdplane/services/gateway/httpx"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metatable "k8s.io/apimachinery/pkg/api/meta/table"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/jsonpath"
)

// Server-side printing: a meta.k8s.io Table of custom resources, with the
// CRD version's additionalPrinterColumns (or AGE alone), as upstream's
// custom resource table convertor renders them.

var metadataDescriptions = metav1.ObjectMeta{}.SwaggerDoc()

// TablePrinter turns objects into table rows.
type TablePrinter struct {
	// headers are the column definitions, "Name" first.
	headers []metav1.TableColumnDefinition
	// cells renders one object's cells.
	cells func(obj Object) []any
}

// PrinterColumns are the columns of a CRD version: its
// additionalPrinterColumns, or AGE when it has none.
func PrinterColumns(crd *apiextensionsv1.CustomResourceDefinition, version string) []apiextensionsv1.CustomResourceColumnDefinition {
	for _, v := range crd.Spec.Versions {
		if v.Name == version && len(v.AdditionalPrinterColumns) > 0 {
			return v.AdditionalPrinterColumns
		}
	}
	return []apiextensionsv1.CustomResourceColumnDefinition{ageColumn()}
}

func ageColumn() apiextensionsv1.CustomResourceColumnDefinition {
	return apiextensionsv1.CustomResourceColumnDefinition{
		Name: "Age", Type: "date", Description: metadataDescriptions["creationTimestamp"], JSONPath: ".metadata.creationTimestamp",
	}
}

// ScaleColumns are the columns of the scale subresource's table.
func ScaleColumns(sc *apiextensionsv1.CustomResourceSubresourceScale) []apiextensionsv1.CustomResourceColumnDefinition {
	var cols []apiextensionsv1.CustomResourceColumnDefinition
	if sc.SpecReplicasPath != "" {
		cols = append(cols, apiextensionsv1.CustomResourceColumnDefinition{Name: "Desired", Type: "integer", Description: "Number of desired replicas", JSONPath: ".spec.replicas"})
	}
	if sc.StatusReplicasPath != "" {
		cols = append(cols, apiextensionsv1.CustomResourceColumnDefinition{Name: "Available", Type: "integer", Description: "Number of actual replicas", JSONPath: ".status.replicas"})
	}
	return append(cols, ageColumn())
}

// NewColumnPrinter is upstream's custom resource table convertor: NAME,
// then one column per definition, its cell the JSONPath's first result
// (strings printed as JSONPath prints them, other types checked against
// the column type, dates as an age). A definition whose JSONPath does not
// parse ends the columns there, as upstream falls back to what it parsed.
func NewColumnPrinter(cols []apiextensionsv1.CustomResourceColumnDefinition) *TablePrinter {
	p := &TablePrinter{headers: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metadataDescriptions["name"]},
	}}
	var paths []*jsonpath.JSONPath
	for _, col := range cols {
		jp := jsonpath.New(col.Name)
		if err := jp.Parse(fmt.Sprintf("{%s}", col.JSONPath)); err != nil {
			break
		}
		jp.AllowMissingKeys(true)
		desc := col.Description
		if desc == "" {
			desc = fmt.Sprintf("Custom resource definition column (in JSONPath format): %s", col.JSONPath)
		}
		paths = append(paths, jp)
		p.headers = append(p.headers, metav1.TableColumnDefinition{
			Name: col.Name, Type: col.Type, Format: col.Format, Description: desc, Priority: col.Priority,
		})
	}
	types := make([]string, len(paths))
	for i := range paths {
		types[i] = p.headers[i+1].Type
	}
	var buf bytes.Buffer
	p.cells = func(obj Object) []any {
		cells := make([]any, 1, 1+len(paths))
		cells[0] = metaString(obj, "name")
		for i, jp := range paths {
			results, err := jp.FindResults(obj)
			if err != nil || len(results) == 0 || len(results[0]) == 0 {
				cells = append(cells, nil)
				continue
			}
			value := results[0][0].Interface()
			if types[i] == "string" {
				buf.Reset()
				if err := jp.PrintResults(&buf, []reflect.Value{reflect.ValueOf(value)}); err == nil {
					cells = append(cells, buf.String())
				} else {
					cells = append(cells, nil)
				}
				continue
			}
			cells = append(cells, cellValue(types[i], value))
		}
		return cells
	}
	return p
}

// cellValue renders a non-string column's value, nil when it does not
// match the column's type.
func cellValue(typ string, value any) any {
	switch typ {
	case "integer":
		switch v := value.(type) {
		case int64:
			return v
		case float64:
			return int64(v)
		case json.Number:
			if i, err := v.Int64(); err == nil {
				return i
			}
		}
	case "number":
		switch v := value.(type) {
		case int64:
			return float64(v)
		case float64:
			return v
		case json.Number:
			if f, err := v.Float64(); err == nil {
				return f
			}
		}
	case "boolean":
		if b, ok := value.(bool); ok {
			return b
		}
	case "string":
		if s, ok := value.(string); ok {
			return s
		}
	case "date":
		if s, ok := value.(string); ok {
			var ts metav1.Time
			if err := ts.UnmarshalQueryParameter(s); err != nil {
				return "<invalid>"
			}
			return metatable.ConvertToHumanReadableDateType(ts)
		}
	}
	return nil
}

// DefaultPrinter is upstream's default table convertor (the CRDs' own):
// NAME and CREATED AT.
func DefaultPrinter() *TablePrinter {
	return &TablePrinter{
		headers: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: metadataDescriptions["name"]},
			{Name: "Created At", Type: "date", Description: metadataDescriptions["creationTimestamp"]},
		},
		cells: func(obj Object) []any {
			var ts metav1.Time
			_ = ts.UnmarshalQueryParameter(metaString(obj, "creationTimestamp"))
			return []any{metaString(obj, "name"), ts.UTC().Format(time.RFC3339)}
		},
	}
}

func metaString(obj Object, key string) string {
	m, _ := obj["metadata"].(map[string]any)
	s, _ := m[key].(string)
	return s
}

// tableOptions reads and validates includeObject from the query, with
// upstream's 400s.
func tableOptions(q url.Values) (*metav1.TableOptions, error) {
	opts := &metav1.TableOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(q, metav1.SchemeGroupVersion, opts); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	switch errs := metav1validation.ValidateTableOptions(opts); len(errs) {
	case 0:
		return opts, nil
	case 1:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs[0].Error()))
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs))
	}
}

// tableWriter renders Tables for one request.
type tableWriter struct {
	printer *TablePrinter
	opts    *metav1.TableOptions
	gv      string // meta.k8s.io/v1 or meta.k8s.io/v1beta1
	// noHeaders leaves the column definitions out (watch events after the
	// first, as upstream).
	noHeaders bool
}

// table renders objs (JSON at the request version) as one Table.
func (w *tableWriter) table(objs [][]byte, listMeta metav1.ListMeta) ([]byte, error) {
	t := metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: w.gv},
		ListMeta: listMeta,
		Rows:     make([]metav1.TableRow, 0, len(objs)),
	}
	if !w.noHeaders {
		t.ColumnDefinitions = w.printer.headers
	}
	for _, raw := range objs {
		obj, err := DecodeObject(raw)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("decode object for table: %w", err))
		}
		row := metav1.TableRow{Cells: w.printer.cells(obj)}
		switch w.opts.IncludeObject {
		case metav1.IncludeObject:
			row.Object.Raw = bytes.TrimSpace(raw)
		case metav1.IncludeNone:
		default:
			if row.Object.Raw, err = partialObjectMetadata(obj, w.gv); err != nil {
				return nil, err
			}
		}
		t.Rows = append(t.Rows, row)
	}
	b, err := json.Marshal(&t)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("encode table: %w", err))
	}
	return b, nil
}

// partialObjectMetadata renders obj's metadata as a PartialObjectMetadata of gv.
func partialObjectMetadata(obj Object, gv string) ([]byte, error) {
	om := metav1.ObjectMeta{}
	if m, ok := obj["metadata"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &om); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("object metadata: %w", err))
		}
	}
	b, err := json.Marshal(&metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{Kind: httpx.AsPartialObjectMetadata, APIVersion: gv},
		ObjectMeta: om,
	})
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return b, nil
}

// partialObjectMetadataList renders a list page's items as a
// PartialObjectMetadataList of gv.
func partialObjectMetadataList(page httpx.ListPage, gv string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"kind":"PartialObjectMetadataList","apiVersion":`)
	httpx.WriteJSONString(&b, gv)
	b.WriteString(`,"metadata":`)
	lm, err := json.Marshal(page.ListMeta())
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	b.Write(lm)
	b.WriteString(`,"items":[`)
	for i, raw := range page.Items {
		obj, err := DecodeObject(raw)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("decode object: %w", err))
		}
		pm, err := partialObjectMetadata(obj, gv)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(pm)
	}
	b.WriteString("]}")
	return b.Bytes(), nil
}
