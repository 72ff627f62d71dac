package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// typeMeta reads an object's apiVersion and kind, skipping every other
// member unparsed: a Node's images or a Pod's statuses cost a scan, not a
// decode, before the kind says whether the object is wanted at all. It
// stops once it has both (kubectl writes them first).
func typeMeta(obj []byte) (metav1.TypeMeta, error) {
	var tm metav1.TypeMeta
	dec := jsontext.NewDecoder(bytes.NewReader(obj), jsonOptions)
	if _, err := dec.ReadToken(); err != nil {
		return tm, fmt.Errorf("not valid JSON: %v", jsonError(err))
	}
	for found := 0; found < 2 && dec.PeekKind() != '}'; {
		name, err := dec.ReadToken()
		if err != nil {
			return tm, fmt.Errorf("not valid JSON: %v", jsonError(err))
		}
		key := name.String()
		if key != "apiVersion" && key != "kind" {
			// ReadValue, not SkipValue: jsontext skips an object
			// token by token, several times slower than it reads one
			// whole.
			if _, err := dec.ReadValue(); err != nil {
				return tm, fmt.Errorf("not valid JSON: %v", jsonError(err))
			}
			continue
		}
		v, err := dec.ReadToken()
		if err != nil {
			return tm, fmt.Errorf("not valid JSON: %v", jsonError(err))
		}
		var s string
		switch v.Kind() {
		case '"':
			s = v.String()
		case 'n':
		default:
			return tm, errors.New("apiVersion and kind must be strings")
		}
		if key == "apiVersion" {
			tm.APIVersion = s
		} else {
			tm.Kind = s
		}
		if s != "" {
			found++
		}
	}
	return tm, nil
}

// The wire forms below are what of a Node and a Pod read back from the API
// server dsguard models (placement, fit, preemption, the coverage map). The
// decoder skips everything else without building it: a Node's images,
// addresses and managedFields, a container's environment, probes and
// mounts. Each decoded object is handed on as a corev1 object that lives as
// long as the callback's use of it.

// skipped is a member the decoder passes over. Named in a wire form, it is
// read as one value; an unknown member would be skipped token by token
// (jsontext's SkipValue), several times slower, and these are the largest
// members of a Node or a Pod.
type skipped struct{}

func (*skipped) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	_, err := dec.ReadValue()
	return err
}

// objectMeta is metav1.ObjectMeta without managedFields, which the API
// server returns on every object and nothing here reads.
type objectMeta struct {
	ManagedFields     skipped                 `json:"managedFields"`
	Name              string                  `json:"name"`
	GenerateName      string                  `json:"generateName"`
	Namespace         string                  `json:"namespace"`
	UID               types.UID               `json:"uid"`
	ResourceVersion   string                  `json:"resourceVersion"`
	CreationTimestamp metav1.Time             `json:"creationTimestamp"`
	DeletionTimestamp *metav1.Time            `json:"deletionTimestamp"`
	Labels            map[string]string       `json:"labels"`
	Annotations       map[string]string       `json:"annotations"`
	OwnerReferences   []metav1.OwnerReference `json:"ownerReferences"`
}

func (m *objectMeta) meta() metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, GenerateName: m.GenerateName, Namespace: m.Namespace, UID: m.UID,
		ResourceVersion: m.ResourceVersion, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
		Labels: m.Labels, Annotations: m.Annotations, OwnerReferences: m.OwnerReferences}
}

type wireNode struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   objectMeta      `json:"metadata"`
	Spec       corev1.NodeSpec `json:"spec"`
	Status     struct {
		Capacity    corev1.ResourceList `json:"capacity"`
		Allocatable corev1.ResourceList `json:"allocatable"`
		// A condition's type, status and reason: its times and
		// message are left out (each time is a decode of its own).
		Conditions []struct {
			Type   corev1.NodeConditionType `json:"type"`
			Status corev1.ConditionStatus   `json:"status"`
			Reason string                   `json:"reason"`
		} `json:"conditions"`
		NodeInfo struct {
			OperatingSystem string `json:"operatingSystem"`
			Architecture    string `json:"architecture"`
			KubeletVersion  string `json:"kubeletVersion"`
		} `json:"nodeInfo"`
		Images          skipped `json:"images"`
		Addresses       skipped `json:"addresses"`
		DaemonEndpoints skipped `json:"daemonEndpoints"`
		VolumesInUse    skipped `json:"volumesInUse"`
		VolumesAttached skipped `json:"volumesAttached"`
		Config          skipped `json:"config"`
		RuntimeHandlers skipped `json:"runtimeHandlers"`
		Features        skipped `json:"features"`
	} `json:"status"`
}

// unmarshalOptions decode as encoding/json does where the API server's
// output could tell them apart: names matched without regard to case,
// duplicates and invalid UTF-8 let through.
var unmarshalOptions = jsonv2.JoinOptions(jsonOptions, jsonv2.MatchCaseInsensitiveNames(true))

// decodeNode decodes a Node and returns the apiVersion and kind it names
// (none for an item of an API server's NodeList).
func decodeNode(obj []byte) (*corev1.Node, metav1.TypeMeta, error) {
	var w wireNode
	if err := jsonv2.Unmarshal(obj, &w, unmarshalOptions); err != nil {
		return nil, metav1.TypeMeta{}, decodeError(err)
	}
	n := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: w.Metadata.meta(), Spec: w.Spec}
	n.Status.Capacity, n.Status.Allocatable = w.Status.Capacity, w.Status.Allocatable
	for _, c := range w.Status.Conditions {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: c.Type, Status: c.Status, Reason: c.Reason})
	}
	n.Status.NodeInfo.OperatingSystem, n.Status.NodeInfo.Architecture = w.Status.NodeInfo.OperatingSystem, w.Status.NodeInfo.Architecture
	n.Status.NodeInfo.KubeletVersion = w.Status.NodeInfo.KubeletVersion
	return n, metav1.TypeMeta{APIVersion: w.APIVersion, Kind: w.Kind}, nil
}

// container is what a Pod's requests, host ports and restart rules (a
// sidecar's requests count for the whole Pod's life) are made of.
type container struct {
	Name          string                         `json:"name"`
	Image         string                         `json:"image"`
	Ports         []corev1.ContainerPort         `json:"ports"`
	Resources     corev1.ResourceRequirements    `json:"resources"`
	ResizePolicy  []corev1.ContainerResizePolicy `json:"resizePolicy"`
	RestartPolicy *corev1.ContainerRestartPolicy `json:"restartPolicy"`

	Command         skipped `json:"command"`
	Args            skipped `json:"args"`
	Env             skipped `json:"env"`
	EnvFrom         skipped `json:"envFrom"`
	VolumeMounts    skipped `json:"volumeMounts"`
	VolumeDevices   skipped `json:"volumeDevices"`
	LivenessProbe   skipped `json:"livenessProbe"`
	ReadinessProbe  skipped `json:"readinessProbe"`
	StartupProbe    skipped `json:"startupProbe"`
	Lifecycle       skipped `json:"lifecycle"`
	SecurityContext skipped `json:"securityContext"`
}

func (c *container) container() corev1.Container {
	return corev1.Container{Name: c.Name, Image: c.Image, Ports: c.Ports, Resources: c.Resources,
		ResizePolicy: c.ResizePolicy, RestartPolicy: c.RestartPolicy}
}

type wirePod struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		corev1.PodSpec
		// These shadow the PodSpec's own.
		InitContainers      []container    `json:"initContainers"`
		Containers          []container    `json:"containers"`
		EphemeralContainers jsontext.Value `json:"ephemeralContainers"`
	} `json:"spec"`
	Status corev1.PodStatus `json:"status"`
}

// decodePod decodes a Pod and returns the apiVersion and kind it names.
func decodePod(obj []byte) (*corev1.Pod, metav1.TypeMeta, error) {
	var w wirePod
	if err := jsonv2.Unmarshal(obj, &w, unmarshalOptions); err != nil {
		return nil, metav1.TypeMeta{}, decodeError(err)
	}
	p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: w.Metadata.meta(), Spec: w.Spec.PodSpec, Status: w.Status}
	p.Spec.InitContainers, p.Spec.Containers = containers(w.Spec.InitContainers), containers(w.Spec.Containers)
	return p, metav1.TypeMeta{APIVersion: w.APIVersion, Kind: w.Kind}, nil
}

func containers(cs []container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		out[i] = cs[i].container()
	}
	return out
}

// decodeError says where in the object a value did not fit, in the words
// of encoding/json's errors ("cannot unmarshal string into ... of type").
func decodeError(err error) error {
	var se *jsonv2.SemanticError
	if errors.As(err, &se) && se.JSONPointer != "" && se.Err != nil {
		return fmt.Errorf("%s: %v", se.JSONPointer, se.Err)
	}
	return errors.New(strings.TrimPrefix(jsonError(err), "json: "))
}
