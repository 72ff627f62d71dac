package clusterview

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// PolicyRef names the ConfigMap and key that hold the policy.
type PolicyRef struct {
	Namespace string
	Name      string
	Key       string
}

// String names the ConfigMap and key for logs and messages.
func (r PolicyRef) String() string {
	return fmt.Sprintf("ConfigMap %s/%s key %s", r.Namespace, r.Name, r.Key)
}

// NamespacedName returns the namespaced name of the policy ConfigMap.
func (r PolicyRef) NamespacedName() types.NamespacedName {
	return types.NamespacedName{Namespace: r.Namespace, Name: r.Name}
}
