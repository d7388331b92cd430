"""Fixed bank policy facts returned by the informational tool actions (keyed by (tool, action))."""

from __future__ import annotations

from typing import Any

from sparring.world.generate import FOREIGN

SORT_CODE = "04-00-75"

INFO: dict[tuple[str, str], dict[str, Any]] = {
    ("card_services", "delivery_info"): {
        "standard_delivery_working_days": "3-5",
        "express_delivery_working_days": "1-2",
        "express_fee_gbp": 5.0,
        "advice": "If a card has not arrived after 7 working days, ask us to trace the delivery.",
    },
    ("card_services", "acceptance_info"): {
        "accepted": "anywhere Mastercard is accepted, online and in shops, in 150+ countries",
        "not_accepted": "some petrol pumps, toll booths and car-rental deposits",
    },
    ("card_services", "disposable_limits_info"): {
        "uses_per_card": 1,
        "max_active_disposable_cards": 5,
        "daily_limit_gbp": 3000.0,
        "advice": "A disposable card's details change after every payment.",
    },
    ("transfer_support", "timing_info"): {
        "uk_faster_payments": "usually within 2 hours",
        "sepa": "1 working day",
        "swift": "2-5 working days",
        "cut_off": "17:00 UK time for same-day processing",
    },
    ("transfer_support", "account_details_info"): {
        "sort_code": SORT_CODE,
        "how": "Share your sort code and account number; transfers in are free.",
    },
    ("top_up_support", "limits_info"): {
        "max_balance_gbp": 50000.0,
        "max_top_up_per_day_gbp": 10000.0,
        "min_top_up_gbp": 10.0,
    },
    ("top_up_support", "card_top_up_info"): {
        "how": "Add a debit or credit card in the app under Top up, then choose the amount.",
        "fee_pct": 0.0,
        "fee_pct_credit_card": 1.5,
    },
    ("top_up_support", "cash_cheque_info"): {
        "cash": "Pay cash in at any Post Office with your card; arrives within 1 working day.",
        "cheque": "Post the cheque to us with a paying-in slip; arrives within 5 working days.",
        "cash_fee_pct": 0.5,
    },
    ("cash_services", "atm_info"): {
        "free_withdrawals_per_month_gbp": 200.0,
        "fee_above_allowance_pct": 2.0,
        "networks": "any ATM showing the Mastercard logo",
    },
    ("identity_verification", "age_policy_info"): {
        "minimum_age": 18,
        "youth_accounts": "13-17 with a parent's account",
    },
    ("identity_verification", "why_verify_info"): {
        "why": "UK anti-money-laundering law requires us to verify every customer's identity.",
        "what_we_need": "a photo ID and a selfie",
    },
    ("fees_and_rates", "exchange_rate"): {
        "rates_per_gbp": dict(FOREIGN),
        "weekend_markup_pct": 0.5,
        "source": "interbank rate at payment time",
    },
    ("fees_and_rates", "exchange_fee"): {
        "free_exchange_per_month_gbp": 1000.0,
        "fee_above_allowance_pct": 0.5,
        "weekend_markup_pct": 0.5,
    },
    ("fees_and_rates", "exchange_in_app"): {
        "how": "Open Exchange in the app, pick two currencies and an amount, confirm.",
        "currencies": sorted(["GBP", *FOREIGN]),
    },
    ("fees_and_rates", "fiat_currencies"): {"hold_and_exchange": sorted(["GBP", *FOREIGN])},
    ("fees_and_rates", "top_up_cards_and_currencies"): {
        "cards": ["Visa", "Mastercard"],
        "currencies": sorted(["GBP", *FOREIGN]),
        "not_supported": "American Express, prepaid cards",
    },
    ("fees_and_rates", "card_network"): {"network": "Mastercard"},
    ("fees_and_rates", "supported_countries"): {
        "account_opening": "UK and EEA residents",
        "card_use": "150+ countries",
    },
    ("fees_and_rates", "card_payment_fee"): {
        "domestic_fee_pct": 0.0,
        "foreign_fee_pct": 0.0,
        "weekend_markup_pct": 0.5,
        "why_fee": "Payments in a foreign currency at the weekend carry a markup.",
    },
    ("fees_and_rates", "transfer_fee"): {
        "uk_transfer_fee_gbp": 0.0,
        "sepa_fee_gbp": 0.0,
        "swift_fee_gbp": 5.0,
        "why_fee": "SWIFT transfers and transfers in other currencies cost a fixed fee.",
    },
    ("fees_and_rates", "cash_withdrawal_fee"): {
        "free_withdrawals_per_month_gbp": 200.0,
        "fee_above_allowance_pct": 2.0,
        "why_fee": "Withdrawals above the monthly allowance cost 2%; some ATM operators add their own fee.",
    },
    ("fees_and_rates", "top_up_card_fee"): {"debit_card_fee_pct": 0.0, "credit_card_fee_pct": 1.5},
    ("fees_and_rates", "top_up_bank_transfer_fee"): {"fee_gbp": 0.0, "arrives": "within 2 hours"},
}

DECLINE_EXPLANATIONS = {
    "transfer": "The receiving bank rejected the payment details; check the account number and send again.",
    "cash": "The withdrawal exceeded the daily ATM limit or the ATM could not reach us; try again later.",
}
