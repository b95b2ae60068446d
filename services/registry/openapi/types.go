package openapi

import apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

type crdVersion = apiextensionsv1.CustomResourceDefinitionVersion
