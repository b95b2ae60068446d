package structural

import (
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

const benchCronTab = `{"apiVersion":"stable.example.com/v1","kind":"CronTab",
"metadata":{"name":"my-new-cron-object","namespace":"default","uid":"9423255b-4600-11e7-af6a-28d2447dc82b",
"creationTimestamp":"2017-05-31T12:56:35Z","generation":1,"labels":{"app":"cron"}},
"spec":{"cronSpec":"* * * * */5","image":"my-awesome-cron-image","replicas":5}}`

// BenchmarkPipeline is decode, normalize, default and validate of the
// reference's CronTab, without encoding the result.
func BenchmarkPipeline(b *testing.B) {
	s := mustCompile(b, parseCRDSchema(b, readFile(b, "../crds/crontab-validation.yaml")))
	raw := []byte(benchCronTab)
	b.ReportAllocs()
	for b.Loop() {
		var obj map[string]any
		if err := utiljson.Unmarshal(raw, &obj); err != nil {
			b.Fatal(err)
		}
		if _, err := Normalize(obj, s, false); err != nil {
			b.Fatal(err)
		}
		Default(obj, s)
		if errs := Validate(obj, s); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

// BenchmarkValidate is schema validation alone.
func BenchmarkValidate(b *testing.B) {
	s := mustCompile(b, parseCRDSchema(b, readFile(b, "../crds/crontab-validation.yaml")))
	var obj map[string]any
	if err := utiljson.Unmarshal([]byte(benchCronTab), &obj); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if errs := Validate(obj, s); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

// BenchmarkUpstreamPipeline is BenchmarkPipeline with upstream's packages,
// for comparison.
func BenchmarkUpstreamPipeline(b *testing.B) {
	up := newUpstream(b, parseCRDSchema(b, readFile(b, "../crds/crontab-validation.yaml")))
	raw := []byte(benchCronTab)
	b.ReportAllocs()
	for b.Loop() {
		var obj map[string]any
		if err := utiljson.Unmarshal(raw, &obj); err != nil {
			b.Fatal(err)
		}
		if _, err := up.decode(obj, false); err != nil {
			b.Fatal(err)
		}
		if errs := up.validate(obj); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

// BenchmarkNormalizeManagedFields is Normalize of an object read back
// with two managedFields entries (the read path of a LIST), metadata only.
func BenchmarkNormalizeManagedFields(b *testing.B) {
	raw := []byte(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"c","namespace":"default",
"uid":"9423255b-4600-11e7-af6a-28d2447dc82b","resourceVersion":"12","creationTimestamp":"2017-05-31T12:56:35Z","generation":2,
"managedFields":[{"manager":"bench","operation":"Apply","apiVersion":"stable.example.com/v1","time":"2017-05-31T12:56:35Z","fieldsType":"FieldsV1",
"fieldsV1":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:cronSpec":{},"f:image":{},"f:ports":{"k:{\"name\":\"http\"}":{".":{},"f:name":{},"f:port":{}}}}}},
{"manager":"editor","operation":"Update","apiVersion":"stable.example.com/v1","time":"2017-05-31T12:57:35Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{}}}}]},
"spec":{"cronSpec":"* * * * */5","image":"my-awesome-cron-image","replicas":5}}`)
	var obj map[string]any
	if err := utiljson.Unmarshal(raw, &obj); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Normalize(obj, nil, true); err != nil {
			b.Fatal(err)
		}
	}
}
