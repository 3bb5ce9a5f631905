package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mlbuild/mlbuild/schema"
)

// starters are the specs `mlbuild init --template NAME` writes, one per
// kind of data a project may start from; each names its model
// starterName, which starterFor replaces by the project's name.
var starters = map[string]string{
	"mnist":      starterSpec,
	"csv":        csvStarter,
	"regression": regressionStarter,
	"images":     imagesStarter,
}

// starterNames lists the templates for help and messages.
func starterNames() string {
	var names []string
	for n := range starters {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// starterFor is the starter spec of a template for the project in dir.
func starterFor(dir, template string) (string, error) {
	src, ok := starters[template]
	if !ok {
		return "", fmt.Errorf("unknown template %q; the templates are %s", template, starterNames())
	}
	return strings.Replace(src, `name: "`+starterName+`"`, `name: "`+modelName(dir)+`"`, 1), nil
}

const csvStarter = `// A starter spec: a classifier of the rows of a CSV file (data.csv in the
// folder given to --data), with a header row, four numeric feature columns
// and a "label" column of class names or indices. Set input to your
// feature count and classes to your class count, then run
// 'mlbuild validate model.cue'. docs/specs.md describes every field.
package model

import "` + schema.ImportPath + `"

schema.#Spec & {
	name: "` + starterName + `"

	model: {
		input: [4] // the feature columns
		layers: [
			{op: "dense", units: 32},
			{op: "relu"},
			{op: "dense", units: 3}, // one score per class
		]
	}

	training: {
		loss: "softmax_cross_entropy"
		optimizer: {kind: "adam", lr: 1e-2}
		epochs:    50
		batchSize: 16
	}

	dataset: {
		format:    "csv"
		task:      "classification"
		train:     "data.csv"
		header:    true
		label:     "label" // by header name, or an index such as -1
		drop: []          // columns that are neither features nor labels
		testSplit: 0.2    // held out for eval; or name a test file with test
		classes:   3
		standardize: true // mean 0, deviation 1, fitted on the training rows
	}
}
`

const regressionStarter = `// A starter spec: regression of a real-valued "target" column of a CSV
// file (data.csv in the folder given to --data, with a header row) from
// its other columns. Set input to your feature count, then run
// 'mlbuild validate model.cue'. docs/specs.md describes every field.
package model

import "` + schema.ImportPath + `"

schema.#Spec & {
	name: "` + starterName + `"

	model: {
		input: [10] // the feature columns
		layers: [
			{op: "dense", units: 32},
			{op: "relu"},
			{op: "dense", units: 1}, // the predicted target
		]
	}

	training: {
		loss: "mse" // or "mae", or "huber" with huberDelta
		optimizer: {kind: "adam", lr: 3e-3}
		epochs:    100
		batchSize: 16
	}

	dataset: {
		format:    "csv"
		task:      "regression"
		train:     "data.csv"
		header:    true
		label:     "target" // a list of columns for several targets
		targets:   1
		testSplit: 0.2
		standardize:        true
		standardizeTargets: true // eval and predict still report the target's units
	}
}
`

const imagesStarter = `// A starter spec: a classifier of colour photographs sorted into one folder
// per class: train/<class>/*.jpg (or .png) and test/<class>/*.jpg in the
// folder given to --data (torchvision's ImageFolder layout; the classes
// are the folder names in sorted order). Images are resized to 64×64 and
// read as RGB, channels first; for grey images make input and imageShape
// [1, 64, 64]. Set classes to your class count, then run
// 'mlbuild validate model.cue'. docs/specs.md describes every field.
package model

import "` + schema.ImportPath + `"

schema.#Spec & {
	name: "` + starterName + `"

	model: {
		input: [3, 64, 64]
		layers: [
			{op: "conv2d", outChannels: 16, kernel: 3, padding: 1},
			{op: "relu"},
			{op: "maxpool2d", kernel: 2},
			{op: "conv2d", outChannels: 32, kernel: 3, padding: 1},
			{op: "relu"},
			{op: "maxpool2d", kernel: 2},
			{op: "flatten"},
			{op: "dense", units: 64},
			{op: "relu"},
			{op: "dense", units: 10}, // one score per class folder
		]
	}

	training: {
		optimizer: {kind: "adam", lr: 1e-3}
		epochs:    10
		batchSize: 32
	}

	dataset: {
		format:  "imagefolder"
		train:   "train"
		test:    "test"
		classes: 10
		imageShape: [3, 64, 64]
		resize: true // resample images of another size
		// ImageNet's per-channel mean and deviation, kept with the
		// weights; or normalize: fit: true for your training set's own.
		normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}
	}
}
`
