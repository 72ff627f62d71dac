package framework

import (
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControllerPlane is etcd and kube-apiserver (envtest) with the real
// kube-controller-manager beside them: the control plane of the suites that
// compare a prediction with what the DaemonSet controller (and scheduler)
// decide, without dsguard's webhook in the way.
type ControllerPlane struct {
	Env    *envtest.Environment
	Config *rest.Config
	KCM    *ControllerManager
}

// StartControllerPlane starts it from the binaries in tools; Stop ends it.
func StartControllerPlane(tools string) (*ControllerPlane, error) {
	env := &envtest.Environment{
		BinaryAssetsDirectory:    tools,
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	kcm, err := StartControllerManager(ControllerManagerOptions{Tools: tools, KubeConfig: env.KubeConfig})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &ControllerPlane{Env: env, Config: cfg, KCM: kcm}, nil
}

// Stop ends kube-controller-manager, then the control plane.
func (p *ControllerPlane) Stop() {
	p.KCM.Stop()
	_ = p.Env.Stop()
}
