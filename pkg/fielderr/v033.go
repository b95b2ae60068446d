package fielderr

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TooLong is v0.33's field.TooLong: the detail reads "may not be more
// than <n> bytes" also for n = 1 (v0.37: "1 byte").
func TooLong(fldPath *field.Path, maxLength int) *field.Error {
	msg := "value is too long"
	if maxLength >= 0 {
		msg = fmt.Sprintf("may not be more than %d bytes", maxLength)
	}
	return &field.Error{Type: field.ErrorTypeTooLong, Field: fldPath.String(), BadValue: "<value omitted>", Detail: msg}
}

// TooMany is v0.33's field.TooMany: the detail reads "must have at most
// <n> items" also for n = 1 (v0.37: "1 item").
func TooMany(fldPath *field.Path, actualQuantity, maxQuantity int) *field.Error {
	msg := "has too many items"
	if maxQuantity >= 0 {
		msg = fmt.Sprintf("must have at most %d items", maxQuantity)
	}
	var actual any = field.OmitValueType{}
	if actualQuantity >= 0 {
		actual = actualQuantity
	}
	return &field.Error{Type: field.ErrorTypeTooMany, Field: fldPath.String(), BadValue: actual, Detail: msg}
}
