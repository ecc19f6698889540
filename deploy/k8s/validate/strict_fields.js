// Unknown-field check for Kubernetes objects. kubernetes-models' validators allow properties the
// API does not define (as its OpenAPI schemas do), so a misspelt optional field such as
// "readinesProbe" would pass them; the API server would drop or refuse it. This reads the
// package's TypeScript declarations (every interface with its properties) and reports each
// key of an object that its type does not declare. Maps ({[key: string]: T}) take any key.
'use strict';
const fs = require('fs');
const path = require('path');

// Global interface name (IIoK8s...) -> declaration text ("{ ... }" or a type expression).
function readDeclarations(roots) {
  const decls = new Map();
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.d.ts')) readFile(p);
    }
  };
  const readFile = (file) => {
    const text = fs.readFileSync(file, 'utf8').replace(/\/\*\*[\s\S]*?\*\//g, '');
    const local = new Map();
    for (const m of text.matchAll(/^export interface (\w+)(?: extends [\w, ]+)? (\{[\s\S]*?\n\})/gm)) local.set(m[1], m[2]);
    for (const m of text.matchAll(/^export declare type (\w+) = ([^;]+);/gm)) local.set(m[1], m[2]);
    for (const m of text.matchAll(/^export \{([^}]*)\};/gm)) {
      for (const pair of m[1].split(',')) {
        const [from, to] = pair.trim().split(/\s+as\s+/);
        if (to && local.has(from)) decls.set(to, local.get(from));
      }
    }
  };
  for (const r of roots) walk(r);
  return decls;
}

// A parser of the subset of TypeScript types the declarations use.
function parseType(text) {
  const tokens = text.match(/"(?:[^"\\]|\\.)*"|[A-Za-z_$][\w$]*|-?\d+(?:\.\d+)?|[{}\[\]<>:;?|(),]/g) || [];
  let i = 0;
  const peek = () => tokens[i];
  const next = () => tokens[i++];
  const expect = (t) => {
    if (next() !== t) throw new Error(`expected ${t} in type ${text.slice(0, 80)}`);
  };
  function union() {
    const of = [primary()];
    while (peek() === '|') {
      next();
      of.push(primary());
    }
    return of.length === 1 ? of[0] : { k: 'union', of };
  }
  function primary() {
    const t = next();
    if (t === 'Array') {
      expect('<');
      const of = union();
      expect('>');
      return { k: 'arr', of };
    }
    if (t === '{') {
      const props = {};
      let index = null;
      while (peek() !== '}') {
        if (peek() === '[') {
          while (next() !== ']');
          expect(':');
          index = union();
        } else {
          const name = JSON.parse(next());
          if (peek() === '?') next();
          expect(':');
          props[name] = union();
        }
        if (peek() === ';') next();
      }
      next();
      return { k: 'obj', props, index };
    }
    if (t === '(') {
      const inner = union();
      expect(')');
      return inner;
    }
    if (/^I[A-Z]/.test(t)) return { k: 'ref', name: t };
    return { k: 'prim' };
  }
  return union();
}

class StrictFields {
  constructor(modelsDir) {
    this.decls = readDeclarations([modelsDir, path.join(modelsDir, '..', '@kubernetes-models', 'apimachinery')]);
    this.parsed = new Map();
  }
  resolve(type) {
    while (type && type.k === 'ref') {
      if (!this.parsed.has(type.name)) {
        const text = this.decls.get(type.name);
        this.parsed.set(type.name, text === undefined ? { k: 'prim' } : parseType(text));
      }
      type = this.parsed.get(type.name);
    }
    return type;
  }
  // Unknown fields of OBJ as the model class CLS (its global name IoK8s...), as "path: field" lines.
  check(obj, globalName) {
    const errors = [];
    if (!this.decls.has('I' + globalName)) return [`no declaration for I${globalName}`];
    this.walk(obj, { k: 'ref', name: 'I' + globalName }, '', errors);
    return errors;
  }
  walk(value, type, where, errors) {
    type = this.resolve(type);
    if (!type || value === null || typeof value !== 'object') return;
    if (type.k === 'union') type = type.of.map((t) => this.resolve(t)).find((t) => t.k === 'obj' || t.k === 'arr');
    if (!type) return;
    if (type.k === 'arr' && Array.isArray(value)) {
      value.forEach((v, n) => this.walk(v, type.of, `${where}[${n}]`, errors));
    } else if (type.k === 'obj' && !Array.isArray(value)) {
      for (const [key, v] of Object.entries(value)) {
        const at = where ? `${where}.${key}` : key;
        if (Object.prototype.hasOwnProperty.call(type.props, key)) this.walk(v, type.props[key], at, errors);
        else if (type.index) this.walk(v, type.index, at, errors);
        else errors.push(`unknown field ${at}`);
      }
    }
  }
}

module.exports = { StrictFields };
