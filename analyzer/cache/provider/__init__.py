"""Provider prompt caches in one place: the rules (:mod:`.rules`), the price table (:mod:`.prices`), the cost arithmetic (:mod:`.cost`) and the caches that apply them (:mod:`.caches`)."""
