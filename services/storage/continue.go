package storage

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
)

// Continue tokens are upstream's (k8s.io/apiserver/pkg/storage): base64url
// (unpadded) of {"v":"meta.k8s.io/v1","rv":<revision>,"start":"<next key
// relative to the prefix>"}.

const continueVersion = "meta.k8s.io/v1"

var (
	errInvalidStartRV      = errors.New("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
	errEmptyStartKey       = errors.New("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")
	errGenericInvalidKey   = errors.New("continue key is not valid")
	errUnrecognizedVersion = errors.New("continue key is not valid: server does not recognize this encoded version")
)

type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

// encodeContinue returns the token that continues a list of prefix at key,
// read at revision rev.
func encodeContinue(key, prefix string, rev int64) (string, error) {
	next, ok := strings.CutPrefix(key, prefix)
	if !ok || next == "" {
		return "", fmt.Errorf("continue key %q is not under %q", key, prefix)
	}
	out, err := json.Marshal(continueToken{APIVersion: continueVersion, ResourceVersion: rev, StartKey: next})
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// decodeContinue returns the key a token continues at (under prefix) and the
// revision of the list (-1: the latest).
func decodeContinue(token, prefix string) (string, int64, error) {
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %v", errGenericInvalidKey, err)
	}
	var c continueToken
	if err := json.Unmarshal(data, &c); err != nil {
		return "", 0, fmt.Errorf("%w: %v", errGenericInvalidKey, err)
	}
	if c.APIVersion != continueVersion {
		return "", 0, fmt.Errorf("%w %v", errUnrecognizedVersion, c.APIVersion)
	}
	if c.ResourceVersion == 0 {
		return "", 0, errInvalidStartRV
	}
	if c.StartKey == "" {
		return "", 0, errEmptyStartKey
	}
	// The start key must stay under the prefix: no "..", no doubled "/".
	key := c.StartKey
	if !strings.HasPrefix(key, "/") {
		key = "/" + key
	}
	if cleaned := path.Clean(key); cleaned != key {
		return "", 0, fmt.Errorf("%w: %v", errGenericInvalidKey, c.StartKey)
	}
	return prefix + key[1:], c.ResourceVersion, nil
}
