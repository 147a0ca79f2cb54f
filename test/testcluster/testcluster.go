// Package testcluster holds what tests that start their own API servers (the integration tests, the
// scale harness) do to them alike: a kubeconfig a worker's registration Secret can hold, and GPU nodes
// that exist only as objects.
package testcluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// GPUProduct is the GPU product of the nodes CreateGPUNode makes.
const GPUProduct = "NVIDIA-H100-80GB-HBM3"

// Kubeconfig renders a kubeconfig with embedded credentials, as a worker's registration Secret holds.
func Kubeconfig(cfg *rest.Config) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	return clientcmd.Write(*kc)
}

// CreateGPUNode makes a Ready node of 64 CPUs, 512 GiB and gpus GPUs of GPUProduct. No kubelet runs
// behind it, and no node controller: its status says it is there, and the not-ready taint the API
// server gives a new node is lifted here.
func CreateGPUNode(ctx context.Context, c client.Client, name string, gpus int64) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{gantry.GPUProductLabel: GPUProduct}}}
	if err := c.Create(ctx, node); err != nil {
		return err
	}
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		gantry.GPUResource:    *resource.NewQuantity(gpus, resource.DecimalSI),
	}
	node.Status = corev1.NodeStatus{Capacity: rl, Allocatable: rl,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}}
	if err := c.Status().Update(ctx, node); err != nil {
		return err
	}
	node.Spec.Taints = nil
	return c.Update(ctx, node)
}
