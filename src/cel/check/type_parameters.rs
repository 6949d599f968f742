//! Type parameters, as cel-go's checker binds them (its `checker/types.go`):
//! an empty literal's items (`[]`, `{}`) are a free type parameter that the
//! first overload taking them binds (`[].filter(x, x % 2 == 0)` is a
//! `list(int)`, `[].sort()` too), and a binding, once made, holds for the
//! rest of the expression, though a later overload may widen it to a more
//! general type. The check works through a [`Mapping`] only where a
//! parameter stands; elsewhere the types are concrete or open.

use crate::cel::check::signatures::declared_overloads;
use crate::cel::check::types::Ty;

/// The bindings of the type parameters made so far, by parameter.
#[derive(Clone, Default)]
pub(crate) struct Mapping {
    bound: Bindings,
}

/// What each parameter is bound to (its number is its index), `None` while
/// it is free.
type Bindings = Vec<Option<Ty>>;

fn bound_to(m: &Bindings, id: u32) -> Option<&Ty> {
    m.get(usize::try_from(id).ok()?).and_then(Option::as_ref)
}

fn bind(m: &mut Bindings, id: u32, ty: Ty) {
    if let Some(slot) = usize::try_from(id).ok().and_then(|at| m.get_mut(at)) {
        *slot = Some(ty);
    }
}

impl Mapping {
    /// A new free type parameter.
    pub(crate) fn fresh(&mut self) -> Ty {
        let id = u32::try_from(self.bound.len()).unwrap_or(u32::MAX);
        self.bound.push(None);
        Ty::Var(id)
    }

    /// `ty` with each bound parameter replaced by its binding; free ones stay.
    pub(crate) fn substitute(&self, ty: &Ty) -> Ty {
        self.substitute_within(ty, 0)
    }

    fn substitute_within(&self, ty: &Ty, depth: usize) -> Ty {
        // The occurs check keeps bindings acyclic; the bound is for safety.
        if depth > 64 {
            return Ty::Unknown;
        }
        let next = depth.saturating_add(1);
        match ty {
            Ty::Var(id) => match bound_to(&self.bound, *id) {
                Some(bound) => self.substitute_within(bound, next),
                None => ty.clone(),
            },
            Ty::List(item) => Ty::list(self.substitute_within(item, next)),
            Ty::Optional(item) => Ty::Optional(Box::new(self.substitute_within(item, next))),
            Ty::Type(item) => Ty::Type(Box::new(self.substitute_within(item, next))),
            Ty::Map(key, value) => Ty::Map(
                Box::new(self.substitute_within(key, next)),
                Box::new(self.substitute_within(value, next)),
            ),
            Ty::Pair(first, second) => Ty::Pair(
                Box::new(self.substitute_within(first, next)),
                Box::new(self.substitute_within(second, next)),
            ),
            other => other.clone(),
        }
    }

    /// The type as cel-go leaves it once the whole expression is checked:
    /// bound parameters replaced, free ones `dyn`.
    pub(crate) fn finish(&self, ty: &Ty) -> Ty {
        match self.substitute(ty) {
            Ty::Var(_) | Ty::Free => Ty::Dyn,
            Ty::List(item) => Ty::list(self.finish(&item)),
            Ty::Optional(item) => Ty::Optional(Box::new(self.finish(&item))),
            Ty::Type(item) => Ty::Type(Box::new(self.finish(&item))),
            Ty::Map(key, value) => {
                Ty::Map(Box::new(self.finish(&key)), Box::new(self.finish(&value)))
            }
            Ty::Pair(first, second) => Ty::Pair(
                Box::new(self.finish(&first)),
                Box::new(self.finish(&second)),
            ),
            other => other,
        }
    }

    /// Replaces each `Ty::Free` the signature tables give (a parameter
    /// they leave free: `optional.none()`, `dyn[?k]`) with a new parameter.
    pub(crate) fn instantiate(&mut self, ty: Ty) -> Ty {
        match ty {
            Ty::Free => self.fresh(),
            Ty::List(item) => Ty::list(self.instantiate(*item)),
            Ty::Optional(item) => Ty::Optional(Box::new(self.instantiate(*item))),
            Ty::Type(item) => Ty::Type(Box::new(self.instantiate(*item))),
            Ty::Map(key, value) => {
                let key = self.instantiate(*key);
                Ty::Map(Box::new(key), Box::new(self.instantiate(*value)))
            }
            other => other,
        }
    }

    /// Binds the type parameters among a call's arguments (the receiver
    /// first) as cel-go's overload resolution does: through each of the
    /// function's overloads that fits, in the order cel-go declares them,
    /// which may widen a parameter bound before (`[[], [1]] + [[dyn(1)]]`
    /// makes the first `[]` a `list(dyn)`). A function without overloads here
    /// leaves them open (`Ty::Unknown`): what cel-go would bind them to is
    /// not known, and nothing is refused through them.
    pub(crate) fn bind_call(&mut self, name: &str, member: bool, all: &[Ty]) {
        if !all.iter().any(Mapping::has_parameter) {
            return;
        }
        if matches!(name, "_&&_" | "_||_" | "!_") {
            for arg in all {
                self.assignable(arg, &Ty::Bool);
            }
            return;
        }
        match declared_overloads(name, member, &mut || self.fresh()) {
            Some(overloads) => {
                for params in overloads {
                    self.assignable_list(all, &params);
                }
            }
            None => {
                for arg in all {
                    self.bind_free(arg, &Ty::Unknown);
                }
            }
        }
    }

    /// Whether `ty` holds a parameter, bound or not.
    pub(crate) fn has_parameter(ty: &Ty) -> bool {
        let mut found = false;
        each_var(ty, &mut |_| found = true);
        found
    }

    /// Binds each free parameter in `ty` to `to` (a call this check has no
    /// overloads for: what cel-go would bind them to is not known here, so
    /// they take an open type and nothing is refused through them).
    pub(crate) fn bind_free(&mut self, ty: &Ty, to: &Ty) {
        let ty = self.substitute(ty);
        let bound = &mut self.bound;
        each_var(&ty, &mut |id| bind(bound, id, to.clone()));
    }

    /// cel-go's `isAssignable`: whether a `t1` may stand where `t2` is
    /// wanted; the bindings this needs are kept only when it may.
    pub(crate) fn assignable(&mut self, t1: &Ty, t2: &Ty) -> bool {
        self.assignable_list(std::slice::from_ref(t1), std::slice::from_ref(t2))
    }

    /// cel-go's `isAssignableList`: each of `l1` where the same of `l2` is
    /// wanted, the bindings kept only when all may.
    pub(crate) fn assignable_list(&mut self, l1: &[Ty], l2: &[Ty]) -> bool {
        let mut copy = self.bound.clone();
        let fits = l1.len() == l2.len()
            && l1
                .iter()
                .zip(l2)
                .all(|(t1, t2)| assignable_in(&mut copy, t1, t2, 0));
        if fits {
            self.bound = copy;
        }
        fits
    }

    /// The type of an item joined to the items before it in a literal:
    /// cel-go's `joinTypes` (the most general of the two where one may stand
    /// for the other, else `dyn`; the homogeneous-literal check decides later
    /// whether that is allowed).
    pub(crate) fn join(&mut self, previous: Ty, current: Ty) -> Ty {
        if self.assignable(&previous, &current) {
            most_general(previous, current)
        } else {
            Ty::Dyn
        }
    }
}

/// Calls `f` with each parameter in `ty`, a type already substituted (so
/// each is free).
fn each_var(ty: &Ty, f: &mut dyn FnMut(u32)) {
    match ty {
        Ty::Var(id) => f(*id),
        Ty::List(item) | Ty::Optional(item) | Ty::Type(item) => each_var(item, f),
        Ty::Map(a, b) | Ty::Pair(a, b) => {
            each_var(a, f);
            each_var(b, f);
        }
        _ => {}
    }
}

/// cel-go's `internalIsAssignable`, over this check's types. Types cel-go
/// does not have (not worked out here, the rewrite's pairs, Kyverno's `Any`)
/// fit anything, as `dyn` does.
fn assignable_in(m: &mut Bindings, t1: &Ty, t2: &Ty, depth: usize) -> bool {
    if depth > 64 {
        return true;
    }
    let next = depth.saturating_add(1);
    if let Ty::Var(v2) = t2 {
        let (valid, has_binding) = valid_substitution(m, t1, *v2, next);
        if valid {
            return true;
        }
        if has_binding {
            return false;
        }
    }
    if let Ty::Var(v1) = t1 {
        return valid_substitution(m, t2, *v1, next).0;
    }
    let open = |t: &Ty| matches!(t, Ty::Dyn | Ty::Unknown | Ty::Free | Ty::Pair(..) | Ty::Any);
    if open(t1) || open(t2) {
        return true;
    }
    let nullable = |t: &Ty| {
        matches!(
            t,
            Ty::Null
                | Ty::Object
                | Ty::JsonPatch
                | Ty::Declared(_)
                | Ty::Timestamp
                | Ty::Duration
                | Ty::Optional(_)
                | Ty::Opaque(_)
        )
    };
    match (t1, t2) {
        (Ty::Null, other) | (other, Ty::Null) => nullable(other),
        (Ty::List(a), Ty::List(b)) | (Ty::Optional(a), Ty::Optional(b)) => {
            assignable_in(m, a, b, next)
        }
        (Ty::Type(_), Ty::Type(_)) => true,
        (Ty::Map(ka, va), Ty::Map(kb, vb)) => {
            assignable_in(m, ka, kb, next) && assignable_in(m, va, vb, next)
        }
        _ => t1 == t2,
    }
}

/// cel-go's `isValidTypeSubstitution`: whether `t1` may be what parameter
/// `v2` stands for (binding it, or widening its binding to the more general
/// of the two), and whether `v2` was bound before.
fn valid_substitution(m: &mut Bindings, t1: &Ty, v2: u32, depth: usize) -> (bool, bool) {
    if *t1 == Ty::Var(v2) {
        return (true, true);
    }
    if let Some(bound) = bound_to(m, v2).cloned() {
        if *t1 == bound {
            return (true, true);
        }
        if assignable_in(m, t1, &bound, depth) {
            let general = most_general(t1.clone(), bound);
            if !occurs(m, v2, &general, depth) {
                bind(m, v2, general);
            }
            return (true, true);
        }
        return (false, true);
    }
    if !occurs(m, v2, t1, depth) {
        bind(m, v2, t1.clone());
        return (true, false);
    }
    (false, false)
}

/// cel-go's occurs check (`notReferencedIn`, negated): whether parameter `v`
/// appears in `within`, through the bindings.
fn occurs(m: &Bindings, v: u32, within: &Ty, depth: usize) -> bool {
    if depth > 64 {
        return true;
    }
    let next = depth.saturating_add(1);
    match within {
        Ty::Var(id) if *id == v => true,
        Ty::Var(id) => bound_to(m, *id).is_some_and(|bound| occurs(m, v, bound, next)),
        Ty::List(item) | Ty::Optional(item) | Ty::Type(item) => occurs(m, v, item, next),
        Ty::Map(a, b) | Ty::Pair(a, b) => occurs(m, v, a, next) || occurs(m, v, b, next),
        _ => false,
    }
}

/// cel-go's `mostGeneral` of two types known to fit each other.
fn most_general(t1: Ty, t2: Ty) -> Ty {
    if less_specific(&t1, &t2) { t1 } else { t2 }
}

/// cel-go's `isEqualOrLessSpecific`.
fn less_specific(t1: &Ty, t2: &Ty) -> bool {
    let general = |t: &Ty| t.is_open();
    if general(t1) {
        return true;
    }
    if general(t2) {
        return false;
    }
    match (t1, t2) {
        (Ty::List(a), Ty::List(b))
        | (Ty::Optional(a), Ty::Optional(b))
        | (Ty::Type(a), Ty::Type(b)) => less_specific(a, b),
        (Ty::Map(ka, va), Ty::Map(kb, vb)) => less_specific(ka, kb) && less_specific(va, vb),
        _ => t1 == t2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_parameter_is_bound_by_the_first_type_it_is_given() {
        let mut m = Mapping::default();
        let t = m.fresh();
        assert!(m.assignable(&t, &Ty::Int));
        assert_eq!(m.substitute(&Ty::list(t.clone())), Ty::list(Ty::Int));
        assert!(
            !m.assignable(&t, &Ty::String),
            "bound to int, a string does not fit"
        );
        // dyn fits and widens the binding, as cel-go's mostGeneral does.
        assert!(m.assignable(&Ty::Dyn, &t));
        assert_eq!(m.substitute(&t), Ty::Dyn);
    }

    #[test]
    fn a_later_call_widens_a_bound_parameter_before_the_literals_are_checked() {
        use crate::testing::cel_libraries::check_source;
        // kube-apiserver v0.37.2 refuses the first three (the homogeneous
        // literals validator reads the widened types) and takes the others.
        for (source, refused) in [
            ("[[], [1]] + [[dyn(1)]]", true),
            ("[dyn(1)] + [?optional.none(), [].size()]", true),
            ("[?optional.none(), 2] + [dyn(1)]", true),
            ("[?optional.none(), [].size()]", false),
            ("[[], [1]]", false),
            ("[dyn(1)] + [[].size(), 2]", false),
        ] {
            let checked = check_source(source);
            assert_eq!(checked.is_err(), refused, "{source}: {checked:?}");
        }
    }

    #[test]
    fn a_failed_assignment_binds_nothing() {
        let mut m = Mapping::default();
        let t = m.fresh();
        assert!(!m.assignable_list(&[t.clone(), Ty::Int], &[Ty::Bytes, Ty::Bytes]));
        assert_eq!(m.substitute(&t), t);
    }

    #[test]
    fn the_occurs_check_refuses_a_parameter_within_itself() {
        let mut m = Mapping::default();
        let t = m.fresh();
        assert!(!m.assignable(&t, &Ty::list(t.clone())));
        assert_eq!(m.substitute(&t), t);
    }
}
