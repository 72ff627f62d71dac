package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// nodeEntryName is the chart's webhook entry for Node updates.
const nodeEntryName = "nodes.dsguard.io"

// installNodeEntry installs the chart's Node entry, as `helm template`
// renders it (its rules and matchConditions), pointed at dsguard.
func (e *environment) installNodeEntry(ctx context.Context) error {
	base := strings.TrimSuffix(e.dsguardURL, daemonSetURL)
	r := framework.Run(ctx, e.root, "", nil, filepath.Join(e.tools, "helm"), "template", "dsguard", "charts/dsguard",
		"--namespace", ownNamespace, "--set", "webhook.url="+base,
		"--set", "webhook.caBundle="+base64.StdEncoding.EncodeToString(e.caBundle),
		"--show-only", "templates/validatingwebhookconfiguration.yaml")
	if r.Err != nil {
		return r.Error()
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.Unmarshal([]byte(r.Stdout), &vwc); err != nil {
		return fmt.Errorf("the chart's webhook configuration: %w", err)
	}
	var hooks []admissionregistrationv1.ValidatingWebhook
	for _, h := range vwc.Webhooks {
		if h.Name == nodeEntryName {
			hooks = append(hooks, h)
		}
	}
	if len(hooks) != 1 {
		return fmt.Errorf("the chart renders %d %s entries, want 1", len(hooks), nodeEntryName)
	}
	_, err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx,
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "load-nodes"}, Webhooks: hooks},
		metav1.CreateOptions{})
	return err
}

// nodeEntryCounts reads from the API server's own metrics how often it
// called the Node entry and how often its match conditions left a request
// out.
func (e *environment) nodeEntryCounts(ctx context.Context) (calls, excluded float64, err error) {
	body, err := e.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, 0, err
	}
	sum := func(name string) (float64, error) {
		v, err := framework.SumMetric(body, name, `name="`+nodeEntryName+`"`)
		if err != nil && strings.Contains(err.Error(), "not served") {
			return 0, nil
		}
		return v, err
	}
	if calls, err = sum("apiserver_admission_webhook_request_total"); err != nil {
		return 0, 0, err
	}
	excluded, err = sum("apiserver_admission_match_condition_exclusions_total")
	return calls, excluded, err
}
