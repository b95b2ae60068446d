// Package listing holds what the gateway's verbs on CRDs and custom
// resources share to read and render objects and lists: list and watch
// options (Params, ParseOptions, StorageOptions), resourceVersion
// parsing and its errors, decoded objects, and responses in the
// negotiated form (RespondObject, RespondList, Tables, partial object
// metadata, the expired continue token's 410).
package listing
