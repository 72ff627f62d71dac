//go:build !offline

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The Helm chart's hooks run the dsguard image itself (it has no shell):
// `hook pre-delete` before `helm uninstall` deletes anything, `hook test` for
// `helm test`.
func newHookCommand() *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "hook",
		Short: "Steps the Helm chart's hooks run (pre-delete, test)",
		Args:  cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: in-cluster, $KUBECONFIG or ~/.kube/config)")
	clientset := func() (kubernetes.Interface, *warnings, error) {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig, Precedence: clientcmd.NewDefaultClientConfigLoadingRules().Precedence},
			&clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, nil, fmt.Errorf("kubeconfig: %w", err)
		}
		w := &warnings{}
		cfg.WarningHandler = w
		c, err := kubernetes.NewForConfig(cfg)
		return c, w, err
	}

	var webhookConfig string
	preDelete := &cobra.Command{
		Use:   "pre-delete",
		Short: "Delete dsguard's ValidatingWebhookConfiguration before its Pods go",
		Long: "Helm 3 deletes a release's webhook configuration after its Deployment: with failurePolicy Fail,\n" +
			"DaemonSet writes would be refused in between, and forever if the uninstall stops half-way.\n" +
			"The chart runs this first, so the webhook is gone before anything that serves it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := clientset()
			if err != nil {
				return err
			}
			err = c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(cmd.Context(), webhookConfig, metav1.DeleteOptions{})
			switch {
			case apierrors.IsNotFound(err):
				fmt.Fprintf(cmd.OutOrStdout(), "ValidatingWebhookConfiguration %s is already gone\n", webhookConfig)
			case err != nil:
				return fmt.Errorf("deleting ValidatingWebhookConfiguration %s: %w", webhookConfig, err)
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "deleted ValidatingWebhookConfiguration %s\n", webhookConfig)
			}
			return nil
		},
	}
	preDelete.Flags().StringVar(&webhookConfig, "webhook-config-name", "dsguard", "the release's ValidatingWebhookConfiguration")

	var namespace string
	var timeout time.Duration
	test := &cobra.Command{
		Use:   "test",
		Short: "Prove that the API server calls dsguard: a server-side dry run of a DaemonSet dsguard must refuse",
		Long: "Sends the API server a dry-run create of a DaemonSet that surges a hostPort agent (maxSurge 1):\n" +
			"its new Pod could never start beside the old one, so dsguard's surge-host-port rule refuses it.\n" +
			"Nothing is stored. Passes when daemonsets.dsguard.io denies it, or warns about it when the policy's\n" +
			"enforcement is warn; retries until --timeout while the replicas come up.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, w, err := clientset()
			if err != nil {
				return err
			}
			var msg string
			var last error
			err = wait.PollUntilContextTimeout(cmd.Context(), 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
				msg, last = probeWebhook(ctx, c, w, namespace)
				return last == nil, nil
			})
			switch {
			case err == nil:
				fmt.Fprintln(cmd.OutOrStdout(), msg)
				return nil
			case last == nil:
				return err
			}
			if hint := likelyCause(last); hint != "" {
				return fmt.Errorf("dsguard did not answer within %s: %w\n%s", timeout, last, hint)
			}
			return fmt.Errorf("dsguard did not answer within %s: %w", timeout, last)
		},
	}
	test.Flags().StringVar(&namespace, "namespace", "default", "namespace of the dry-run DaemonSet (one dsguard evaluates, not its own)")
	test.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for dsguard to answer")

	cmd.AddCommand(preDelete, test)
	return cmd
}

// smokeWebhook is the webhook entry that judges DaemonSets outside kube-system.
const smokeWebhook = "daemonsets.dsguard.io"

// probeWebhook dry-runs the smoke-test DaemonSet once; nil error means dsguard answered.
func probeWebhook(ctx context.Context, c kubernetes.Interface, w *warnings, namespace string) (string, error) {
	w.reset()
	_, err := c.AppsV1().DaemonSets(namespace).Create(ctx, smokeDaemonSet(namespace), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		if strings.Contains(err.Error(), `admission webhook "`+smokeWebhook+`" denied the request`) && strings.Contains(err.Error(), "surge-host-port") {
			return "ok: " + err.Error(), nil
		}
		return "", err
	}
	for _, m := range w.all() {
		if strings.HasPrefix(m, "surge-host-port") {
			return "ok: admitted with dsguard's warning (the policy's enforcement is not enforce): " + m, nil
		}
	}
	return "", errors.New("the DaemonSet was admitted without a word from dsguard: the webhook configuration does not send " +
		namespace + " to dsguard (an excluded namespace?) or failurePolicy Ignore hid an outage")
}

// likelyCause names what usually stands behind a failed probe, from the
// words of the API server's answer, and what to do; "" when the answer
// says nothing known. docs/managed-clusters.md has the long form.
func likelyCause(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(msg, w) {
				return true
			}
		}
		return false
	}
	switch {
	case has("x509:", "certificate signed by unknown authority", "tls: failed to verify"):
		return "likely cause: the webhook configuration's caBundle does not match the certificate dsguard serves. " +
			"With tls.mode=selfManaged dsguard writes it within seconds of starting; with certManager check that " +
			"cainjector runs; with file, set webhook.caBundle to the CA that issued tls.secretName."
	case has("no endpoints available", "connection refused"):
		return "likely cause: no dsguard replica is ready behind the Service, or a NetworkPolicy keeps the API server " +
			"out: kubectl -n <namespace> get pods,endpoints; networkPolicy.webhookFrom must admit the control plane's " +
			"addresses (or networkPolicy.webhookFromAPIServer=true)."
	case has("context deadline exceeded", "Client.Timeout exceeded", "i/o timeout", "timed out", "no route to host"):
		return "likely cause: the API server cannot reach the Pods. A managed control plane often cannot open " +
			"connections to Pod IPs or to port 9443: on GKE private clusters add a firewall rule from the control " +
			"plane's range to the nodes on TCP 9443; on EKS with a CNI other than the AWS VPC CNI (Calico, Cilium in " +
			"overlay mode) set hostNetwork=true; see docs/managed-clusters.md."
	case has("admitted without a word from dsguard"):
		return "likely cause: the request never reached dsguard: the namespace is excluded (webhook.excludedNamespaces, " +
			"the fail-open namespaces), failurePolicy Ignore hid an outage, or on AKS the Admissions Enforcer rewrote " +
			"the webhook configuration (helm upgrade --set-string 'webhook.annotations.admissions\\.enforcer/disabled=true')."
	}
	return ""
}

// smokeDaemonSet surges a hostPort agent, which surge-host-port denies
// whatever the nodes; the same object as the chart's install notes.
func smokeDaemonSet(namespace string) *appsv1.DaemonSet {
	labels := map[string]string{"app": "dsguard-smoke-test"}
	surge, unavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "dsguard-smoke-test", Namespace: namespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxSurge: &surge, MaxUnavailable: &unavailable},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name: "agent", Image: "registry.k8s.io/pause:3.10",
						Ports: []corev1.ContainerPort{{ContainerPort: 9100, HostPort: 9100}},
					}},
				},
			},
		},
	}
}

// warnings collects the Warning headers of the API server's answers.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

var _ rest.WarningHandler = (*warnings)(nil)

// HandleWarningHeader records one warning.
func (w *warnings) HandleWarningHeader(_ int, _ string, message string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, message)
}

func (w *warnings) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = nil
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}
