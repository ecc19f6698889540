#!/usr/bin/env node
// Validates Kubernetes manifests against the Kubernetes API schemas of the npm package
// kubernetes-models (its JSON-schema validators: types, required fields, enums, formats), and
// refuses fields the API does not define (strict_fields.js, from the package's declarations).
//
//   node validate.js [--kustomize DIR] [FILE.yaml ...] [--self-test]
//
// --kustomize DIR: every file in DIR/kustomization.yaml's resources, and the ConfigMaps of its
// configMapGenerator (built from their files as kustomize would); every *.yaml in DIR must be
// one of them (or kustomization.yaml). FILE: any more manifests (e.g. make-secrets.sh's output).
// Each YAML document must have an apiVersion and kind that kubernetes-models has a model for.
// --self-test: also checks that the validator rejects broken copies of the first StatefulSet
// (wrong types, a bad enum, a missing required field), so a validator that accepts anything
// fails. Prints one line a document; exits 1 if any document fails, 2 on bad usage.
'use strict';
const fs = require('fs');
const path = require('path');
const yaml = require('js-yaml');
const models = require('kubernetes-models');
const { StrictFields } = require('./strict_fields.js');

const strict = new StrictFields(path.dirname(require.resolve('kubernetes-models/package.json')));

// "apps/v1" -> models.apps.v1, "v1" -> models.v1, "policy/v1" -> models.policy.v1,
// "networking.k8s.io/v1" -> models.networkingK8sIo.v1 (the package's export names).
function modelFor(apiVersion, kind) {
  if (typeof apiVersion !== 'string' || typeof kind !== 'string') return null;
  const parts = apiVersion.split('/');
  let group = models;
  if (parts.length === 2) {
    const name = parts[0].replace(/\.([a-z])/g, (_, c) => c.toUpperCase());
    group = models[name];
  } else if (parts.length !== 1) {
    return null;
  }
  const version = group && group[parts[parts.length - 1]];
  const cls = version && version[kind];
  if (!cls || cls.kind !== kind) return null;
  const globalName = Object.keys(version).find((n) => n.startsWith('IoK8s') && version[n] === cls);
  return globalName ? { cls, globalName } : null;
}

// Errors of one object, [] when it is valid.
function check(obj) {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) return ['not a YAML mapping'];
  const model = modelFor(obj.apiVersion, obj.kind);
  if (!model) return [`no Kubernetes model for apiVersion ${obj.apiVersion} kind ${obj.kind}`];
  const errors = [];
  if (!obj.metadata || typeof obj.metadata.name !== 'string' || obj.metadata.name === '')
    errors.push('metadata.name is missing');
  try {
    new model.cls(obj).validate();
  } catch (e) {
    errors.push(String(e.message || e));
  }
  return errors.concat(strict.check(obj, model.globalName));
}

function loadDocs(file) {
  return yaml.loadAll(fs.readFileSync(file, 'utf8'), null, { filename: file }).filter((d) => d !== null);
}

let failed = 0;
let checked = 0;
function report(where, obj, errors) {
  checked++;
  const what = obj && typeof obj === 'object' ? `${obj.kind}/${obj.metadata && obj.metadata.name}` : '?';
  if (errors.length === 0) {
    console.log(`ok   ${where}: ${what}`);
  } else {
    failed++;
    for (const e of errors) console.log(`FAIL ${where}: ${what}: ${e}`);
  }
}

function checkFile(file, label) {
  let docs;
  try {
    docs = loadDocs(file);
  } catch (e) {
    failed++;
    console.log(`FAIL ${label}: ${e.message}`);
    return [];
  }
  if (docs.length === 0) {
    failed++;
    console.log(`FAIL ${label}: no YAML document`);
  }
  for (const d of docs) report(label, d, check(d));
  return docs;
}

const args = process.argv.slice(2);
const files = [];
let kustomizeDir = null;
let selfTest = false;
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--kustomize' && i + 1 < args.length) kustomizeDir = args[++i];
  else if (args[i] === '--self-test') selfTest = true;
  else if (args[i].startsWith('--')) {
    console.error(`validate.js: unknown option ${args[i]}`);
    process.exit(2);
  } else files.push(args[i]);
}
if (!kustomizeDir && files.length === 0) {
  console.error('usage: validate.js [--kustomize DIR] [FILE.yaml ...] [--self-test]');
  process.exit(2);
}

const all = [];
if (kustomizeDir) {
  const kfile = path.join(kustomizeDir, 'kustomization.yaml');
  const k = yaml.load(fs.readFileSync(kfile, 'utf8'));
  const resources = (k && k.resources) || [];
  if (resources.length === 0) {
    failed++;
    console.log(`FAIL ${kfile}: no resources`);
  }
  for (const r of resources) {
    const file = path.join(kustomizeDir, r);
    if (!fs.existsSync(file)) {
      failed++;
      console.log(`FAIL ${kfile}: resource ${r} does not exist`);
      continue;
    }
    all.push(...checkFile(file, r));
  }
  for (const f of fs.readdirSync(kustomizeDir).filter((f) => /\.ya?ml$/.test(f)).sort()) {
    if (f !== 'kustomization.yaml' && !resources.includes(f)) {
      failed++;
      console.log(`FAIL ${kfile}: ${f} is not in resources (kubectl apply -k would leave it out)`);
    }
  }
  for (const g of (k && k.configMapGenerator) || []) {
    const data = {};
    for (const f of g.files || []) {
      const [key, rel] = f.includes('=') ? f.split('=', 2) : [path.basename(f), f];
      const file = path.join(kustomizeDir, rel);
      if (!fs.existsSync(file)) {
        failed++;
        console.log(`FAIL ${kfile}: configMapGenerator ${g.name}: ${rel} does not exist`);
        continue;
      }
      data[key] = fs.readFileSync(file, 'utf8');
    }
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: g.name, namespace: k.namespace }, data };
    report(`kustomization.yaml configMapGenerator`, cm, check(cm));
    all.push(cm);
  }
}
for (const f of files) all.push(...checkFile(f, f));

if (selfTest) {
  const base = all.find((d) => d && d.kind === 'StatefulSet');
  const broken = [
    ['spec.replicas as a string', (s) => { s.spec.replicas = String(s.spec.replicas); }],
    ['a containerPort as a string', (s) => { s.spec.template.spec.containers[0].ports[0].containerPort = 'zmq'; }],
    ['podManagementPolicy not in its enum', (s) => { s.spec.podManagementPolicy = 'AllAtOnce'; }],
    ['the pod template without containers', (s) => { delete s.spec.template.spec.containers; }],
    ['args as a string, not a list', (s) => { s.spec.template.spec.containers[0].args = 'search-node --index x'; }],
    ['a misspelt field (readinesProbe)', (s) => { s.spec.template.spec.containers[0].readinesProbe = { tcpSocket: { port: 9210 } }; }],
    ['an unknown field in a volume claim template', (s) => { s.spec.volumeClaimTemplates[0].spec.storageClass = 'fast'; }],
  ];
  if (!base) {
    failed++;
    console.log('FAIL self-test: no StatefulSet to break');
  } else {
    for (const [what, breakIt] of broken) {
      const copy = JSON.parse(JSON.stringify(base));
      breakIt(copy);
      const errors = check(copy);
      checked++;
      if (errors.length === 0) {
        failed++;
        console.log(`FAIL self-test: a StatefulSet with ${what} passed validation`);
      } else {
        console.log(`ok   self-test: a StatefulSet with ${what} is rejected: ${errors[0]}`);
      }
    }
  }
}

console.log(`validate.js: ${checked - failed} of ${checked} checks passed (kubernetes-models ${require('kubernetes-models/package.json').version})`);
process.exit(failed === 0 ? 0 : 1);
