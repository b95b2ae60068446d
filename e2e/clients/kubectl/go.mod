module github.com/crdplane/crdplane/e2e/clients/kubectl

go 1.26.0
