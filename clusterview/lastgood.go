package clusterview

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The last good policy is kept in a ConfigMap of its own in dsguard's
// namespace, apart from the policy ConfigMap people edit (and may delete):
// only dsguard's ServiceAccount (RBAC by resourceNames) and cluster
// administrators can write it, so a DaemonSet author can neither forge nor
// remove it. It holds the document and its SHA-256, both checked before use.
const (
	// LastGoodSuffix makes the record's name from the policy ConfigMap's:
	// dsguard-policy-last-good.
	LastGoodSuffix = "-last-good"
	// LastGoodDocumentKey holds the policy document.
	LastGoodDocumentKey = "policy.yaml"
	// LastGoodDigestKey holds the hex SHA-256 of the document: a record
	// edited by hand or cut short is refused, not half-read.
	LastGoodDigestKey = "sha256"
	// LastGoodLabel marks the record (it is no policy ConfigMap).
	LastGoodLabel = "dsguard.io/last-good-policy"
)

// ErrNoLastGood says no last good policy has been recorded yet: a first
// install that never had a valid policy ConfigMap.
var ErrNoLastGood = errors.New("no last good policy recorded")

// LastGoodStore reads and writes the record of the last good policy.
type LastGoodStore struct {
	// Client writes the record.
	Client client.Client
	// Reader reads it, uncached: it is read at start and on demand only,
	// so no informer (and no list permission) is needed.
	Reader client.Reader
	// Namespace and Name locate the record.
	Namespace, Name string
}

// Digest is the record's checksum of document.
func Digest(document []byte) string {
	sum := sha256.Sum256(document)
	return hex.EncodeToString(sum[:])
}

func (s *LastGoodStore) key() types.NamespacedName {
	return types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
}

// String names the record for logs and Events.
func (s *LastGoodStore) String() string { return "ConfigMap " + s.Namespace + "/" + s.Name }

// Load returns the recorded document and the record (for Events). It fails
// with ErrNoLastGood when there is none, and with a description when the
// record is not intact. The caller still parses and validates the document.
func (s *LastGoodStore) Load(ctx context.Context) ([]byte, *corev1.ConfigMap, error) {
	var cm corev1.ConfigMap
	err := s.Reader.Get(ctx, s.key(), &cm)
	if apierrors.IsNotFound(err) {
		return nil, nil, ErrNoLastGood
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the last good policy %s: %w", s, err)
	}
	doc, ok := cm.Data[LastGoodDocumentKey]
	if !ok || doc == "" {
		return nil, &cm, ErrNoLastGood
	}
	want, ok := cm.Data[LastGoodDigestKey]
	if !ok {
		return nil, &cm, fmt.Errorf("the last good policy %s has no %s", s, LastGoodDigestKey)
	}
	if got := Digest([]byte(doc)); got != want {
		return nil, &cm, fmt.Errorf("the last good policy %s does not match its %s (it was changed by hand or cut short)", s, LastGoodDigestKey)
	}
	return []byte(doc), &cm, nil
}

// Save records document, which the caller has loaded successfully. It
// writes only when the record differs, so every replica may call it.
func (s *LastGoodStore) Save(ctx context.Context, document []byte) error {
	data := map[string]string{LastGoodDocumentKey: string(document), LastGoodDigestKey: Digest(document)}
	var cm corev1.ConfigMap
	err := s.Reader.Get(ctx, s.key(), &cm)
	if apierrors.IsNotFound(err) {
		// The chart creates the record (so dsguard's ServiceAccount needs
		// no create on ConfigMaps); without the chart, dsguard does.
		cm = corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: map[string]string{LastGoodLabel: "true"}},
			Data:       data,
		}
		if err := s.Client.Create(ctx, &cm); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the last good policy %s: %w", s, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the last good policy %s: %w", s, err)
	}
	if cm.Data[LastGoodDocumentKey] == data[LastGoodDocumentKey] && cm.Data[LastGoodDigestKey] == data[LastGoodDigestKey] {
		return nil
	}
	cm.Data = data
	// The update carries the resourceVersion: of two replicas writing at
	// once, one wins and the other's next load writes again if need be.
	if err := s.Client.Update(ctx, &cm); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("recording the last good policy in %s: %w", s, err)
	}
	return nil
}
